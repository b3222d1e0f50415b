"""Tensor: device memory with a shape and dtype, and the leaves of expressions.

Reading a Tensor in an expression computes nothing; writing one (`y[...] = e`, `y += e`,
`y.assign(e)`) evaluates the expression into its memory with one fused kernel.
"""
from __future__ import annotations

import sys

import numpy as np

from lazytensor.core import dtypes as _dt
from lazytensor.kernels.backend import backend_for, default_device
from lazytensor.core import upward
from lazytensor.core.operand import Operand


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

    # -- writing ---------------------------------------------------------------------------------
    def __setitem__(self, key, value):
        if key is not Ellipsis and upward.indexing.is_advanced(key):
            return upward.indexing.setitem(self, key, value)      # a mask or index array: a scatter
        dest = self if key is Ellipsis else self[key]
        upward.evaluation.assign(dest, value)

    def assign(self, value) -> "Tensor":
        upward.evaluation.assign(self, value)
        return self

    def _inplace(self, op, other):
        # An operand nothing else holds (the temporary `b * a` of `a += b * a`) is part of the value
        # being written: the write need not evaluate it first, though it reads `a` (assign.writes).
        private = (other,) if sys.getrefcount(other) <= _OPERAND_CALL_REFS and isinstance(other, Operand) else ()
        from lazytensor.core.expr import apply
        upward.evaluation.assign(self, apply(op, self, other), what="apply an in-place op from", private=private,
                                 held=False)
        return self

    def __iadd__(self, o): return self._inplace("add", o)
    def __isub__(self, o): return self._inplace("subtract", o)
    def __imul__(self, o): return self._inplace("multiply", o)
    def __itruediv__(self, o): return self._inplace("true_divide", o)
    def __ifloordiv__(self, o): return self._inplace("floor_divide", o)
    def __imod__(self, o): return self._inplace("remainder", o)
    def __ipow__(self, o): return self._inplace("power", o)
    def __iand__(self, o): return self._inplace("bitwise_and", o)
    def __ior__(self, o): return self._inplace("bitwise_or", o)
    def __ixor__(self, o): return self._inplace("bitwise_xor", o)
    def __ilshift__(self, o): return self._inplace("left_shift", o)
    def __irshift__(self, o): return self._inplace("right_shift", o)

    # -- reading -----------------------------------------------------------------------------------
    def __copy__(self) -> "Tensor":
        return upward.evaluation.evaluate(self)      # new memory, as copy.copy of a NumPy array

    def __deepcopy__(self, memo) -> "Tensor":
        return upward.evaluation.evaluate(self)

    def __dlpack__(self, *args, **kwargs):
        return self.data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.data.__dlpack_device__()

    @property
    def __cuda_array_interface__(self):
        if self.device != "cuda":
            raise AttributeError("__cuda_array_interface__ exists only for tensors on 'cuda'")
        return self.data.__cuda_array_interface__

    def __repr__(self):
        body = np.array2string(upward.evaluation.to_numpy_shared(self), separator=", ", prefix="Tensor(", threshold=200)
        return f"Tensor({body}, dtype={self.dtype.name}, device={self.device!r})"


from lazytensor.core import expr as _expr  # noqa: E402
_expr.tensor_defined(Tensor)


class _CallShape:
    """The call path of an in-place operator (`t += x` -> __iadd__ -> _inplace), to count the
    references that path itself holds to a temporary right operand: the interpreter's stack,
    each frame's parameter and getrefcount's argument."""
    def __iadd__(self, o): return self._inplace("add", o)

    def _inplace(self, op, other):
        self.count = sys.getrefcount(other)
        return self


def _operand_call_refs() -> int:
    probe = _CallShape()
    probe += object()
    return probe.count


_OPERAND_CALL_REFS = _operand_call_refs()

_load_keys: dict = {}


def _load_key(dtype) -> int:
    k = _load_keys.get(dtype)
    if k is None:
        from lazytensor.core.expr import structure_id
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
            obj = upward.evaluation.evaluate(obj.astype(dtype))
        if device is None or device == obj.device:
            return obj
        return Tensor(backend_for(device).asarray(obj.numpy()), device)
    if isinstance(obj, Operand):
        t = upward.evaluation.evaluate(obj if dtype is None else obj.astype(dtype))
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


def _like(x, dtype, device):
    return (x.shape, x.dtype if dtype is None else dtype, getattr(x, "device", None) if device is None else device)


def empty_like(x, dtype=None, device=None) -> Tensor:
    return empty(*_like(x, dtype, device))


def zeros_like(x, dtype=None, device=None) -> Tensor:
    return zeros(*_like(x, dtype, device))


def ones_like(x, dtype=None, device=None) -> Tensor:
    return ones(*_like(x, dtype, device))


def full_like(x, fill_value, dtype=None, device=None) -> Tensor:
    shape, dtype, device = _like(x, dtype, device)
    return full(shape, fill_value, dtype, device)


def arange(start, stop=None, step=1, dtype=None, device=None) -> Tensor:
    values = np.arange(start, stop, step, dtype=dtype)
    return asarray(values, device=device)
