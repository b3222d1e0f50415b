"""Tensor: device memory with a shape and dtype, and the leaves of expressions.

Reading a Tensor in an expression computes nothing; writing one (`y[...] = e`, `y += e`,
`y.assign(e)`) evaluates the expression into its memory with one fused kernel. Those user methods
are set on the class by lazytensor.array_methods (declared for editors in tensor.pyi).
"""
from __future__ import annotations

import numpy as np

from lazytensor.core import dtypes as _dt
from lazytensor.kernels.backend import backend_for, default_device
from lazytensor.core.operand import Operand
from lazytensor.core.structure_ids import structure_id


class Tensor(Operand):
    # A Tensor never changes which memory it views, so its shape and dtype are plain attributes
    # (read on every operator, cheaper than properties) and its structure id is fixed.
    __slots__ = ("data", "device", "shape", "dtype", "skey", "layout", "flat", "memory", "view_of", "__weakref__")

    def __init__(self, data, device: str):
        dtype = data.dtype
        self.data = data          # numpy.ndarray on "cpu", cupy.ndarray on "cuda"
        self.device = device
        self.shape = data.shape
        self.dtype = dtype
        k = _load_keys.get(dtype)
        self.skey = k if k is not None else _load_key(_dt.check_supported(dtype))
        self.layout = None      # what a plan recipe's signature reads of the array, once (lazytensor.reuse.recipes)
        self.flat = None        # (id of its allocation's owner, C-contiguous), once (lazytensor.assign.direct)
        self.memory = None      # the record of the live expressions reading its allocation (core.readers)
        self.view_of = None     # (base Tensor, ((view step, shape after it), ...)) when made as a view (core.view_steps)

    heavy = False
    shared = False
    scalars = ()

    @property
    def leaves(self):
        return (self,)

    @property
    def backend(self):
        return backend_for(self.device)

    @property
    def __cuda_array_interface__(self):
        if self.device != "cuda":
            raise AttributeError("__cuda_array_interface__ exists only for tensors on 'cuda'")
        return self.data.__cuda_array_interface__


_load_keys: dict = {}


def _load_key(dtype) -> int:
    k = _load_keys.get(dtype)
    if k is None:
        k = _load_keys[dtype] = structure_id(("load", dtype))
    return k


# -- constructors --------------------------------------------------------------------------------

def _device(device):
    if device is None:
        return default_device()
    if device not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}: expected 'cpu' or 'cuda'")
    return device


def asarray(obj, dtype=None, device=None) -> Tensor:
    """A Tensor from a NumPy array, a CuPy array, any object with __cuda_array_interface__ or
    __dlpack__, a nested list, or a scalar. Device memory is shared, never copied, when possible."""
    if isinstance(obj, Tensor):
        if (device is None or device == obj.device) and (dtype is None or np.dtype(dtype) == obj.dtype):
            return obj
        if dtype is not None:
            obj = obj.astype(dtype).eval()
        if device is None or device == obj.device:
            return obj
        return Tensor(backend_for(device).asarray(obj.numpy()), device)
    if isinstance(obj, Operand):
        t = (obj if dtype is None else obj.astype(dtype)).eval()
        return asarray(t, device=device)
    if device is None and (hasattr(obj, "__cuda_array_interface__") or _is_cuda_dlpack(obj)):
        device = "cuda"
    device = _device(device)
    if dtype is not None:
        dtype = _dt.check_supported(dtype)
    if device == "cpu" and _is_cuda_dlpack(obj):
        raise ValueError("this array lives on a CUDA device; pass device='cuda' or copy it to the host first")
    data = backend_for(device).asarray(obj, dtype)
    return Tensor(data, device)


def _is_cuda_dlpack(obj) -> bool:
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is None or isinstance(obj, np.ndarray):
        return False
    try:
        return dev()[0] in (2, 13)   # kDLCUDA, kDLCUDAManaged
    except Exception:
        return False


def as_node(x):
    """Operands of expressions: Tensors and expressions as they are, NumPy arrays as CPU tensors
    over a copy (a NumPy array is read when the expression is built, as NumPy would compute it
    then: a later write into the array does not change the expression)."""
    if isinstance(x, Operand):
        return x
    if isinstance(x, np.ndarray):
        return Tensor(np.array(x, copy=True), "cpu")
    raise TypeError(f"cannot use {type(x).__name__} as a tensor")


def empty(shape, dtype=None, device=None) -> Tensor:
    """An uninitialized tensor; dtype float64 by default, as NumPy's."""
    device = _device(device)
    dtype = np.float64 if dtype is None else dtype
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return Tensor(backend_for(device).empty(shape, _dt.check_supported(dtype)), device)


def full(shape, fill_value, dtype=None, device=None) -> Tensor:
    value = np.asarray(fill_value) if dtype is None else np.asarray(fill_value).astype(dtype)
    t = empty(shape, value.dtype, device)
    t[...] = value[()]          # a NumPy scalar of the tensor's dtype: an exact, explicit cast
    return t


def zeros(shape, dtype=None, device=None) -> Tensor:
    return full(shape, 0, np.float64 if dtype is None else dtype, device)


def ones(shape, dtype=None, device=None) -> Tensor:
    return full(shape, 1, np.float64 if dtype is None else dtype, device)


def _like(x, dtype, device, shape=None):
    return (x.shape if shape is None else shape, x.dtype if dtype is None else dtype,
            getattr(x, "device", None) if device is None else device)


def empty_like(x, dtype=None, device=None, shape=None) -> Tensor:
    return empty(*_like(x, dtype, device, shape))


def zeros_like(x, dtype=None, device=None, shape=None) -> Tensor:
    return zeros(*_like(x, dtype, device, shape))


def ones_like(x, dtype=None, device=None, shape=None) -> Tensor:
    return ones(*_like(x, dtype, device, shape))


def full_like(x, fill_value, dtype=None, device=None, shape=None) -> Tensor:
    shape, dtype, device = _like(x, dtype, device, shape)
    return full(shape, fill_value, dtype, device)


def arange(start, stop=None, step=1, dtype=None, device=None) -> Tensor:
    values = np.arange(start, stop, step, dtype=dtype)
    return asarray(values, device=device)
