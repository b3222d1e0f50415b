"""Gathers whose result shape or positions come from data: nonzero, single-argument where, take,
take_along_axis. They evaluate their operands (on CUDA, nonzero's result size needs a host sync)
and gather with the device's array library into new tensors."""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import Tensor
from lazytensor.ops.device_arrays import array_module, evaluated


def nonzero(x) -> tuple:
    """np.nonzero: one int64 tensor of indices per axis, where x is nonzero (true)."""
    t = evaluated(x)
    if t.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d(scalar).nonzero() instead.")
    xp = array_module(t.device)
    return tuple(Tensor(i.astype(np.int64, copy=False), t.device) for i in xp.nonzero(t.data))


def take(x, indices, axis=None) -> Tensor:
    """np.take: the elements at `indices` along `axis` (None: of the flattened x)."""
    t = evaluated(x)
    xp = array_module(t.device)
    idx = _indices(indices, t.device, xp)
    n = t.size if axis is None else t.shape[axis]
    _check_bounds(idx, n, xp)
    return Tensor(xp.take(t.data, idx, axis=axis), t.device)


def take_along_axis(x, indices, axis) -> Tensor:
    """np.take_along_axis: x's elements at `indices` (of x's rank) along `axis`."""
    t = evaluated(x)
    xp = array_module(t.device)
    idx = _indices(indices, t.device, xp)
    _check_bounds(idx, t.size if axis is None else t.shape[axis], xp)
    return Tensor(xp.take_along_axis(t.data, idx, axis=axis), t.device)


def _indices(indices, device, xp):
    if isinstance(indices, (int, np.integer, list, tuple, np.ndarray)) and device == "cpu":
        idx = np.asarray(indices)
    elif isinstance(indices, (int, np.integer, list, tuple, np.ndarray)):
        idx = xp.asarray(indices)
    else:
        it = evaluated(indices)
        if it.device != device:
            raise ValueError(f"indices on {it.device!r} for a tensor on {device!r}: move one with lt.asarray(x, device=...)")
        idx = it.data
    if idx.dtype.kind not in "iu":
        raise IndexError(f"indices must be integers, got {idx.dtype.name}")
    return idx


def _check_bounds(idx, n, xp):
    """NumPy raises for an index out of range; CuPy would wrap it, so check (a host sync on CUDA)."""
    if idx.size and (int(idx.max()) >= n or int(idx.min()) < -n):
        raise IndexError(f"index {int(idx.max()) if int(idx.max()) >= n else int(idx.min())} is out of bounds "
                         f"for axis with size {n}")


# -- fancy and boolean indexing: a[idx], a[mask], y[mask] = v, y[idx] = v --------------------------------

def is_advanced(key) -> bool:
    """Whether an index holds an index array or a mask (NumPy's advanced indexing)."""
    from lazytensor.core.operand import Operand
    items = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (Operand, np.ndarray, list)) or isinstance(k, (bool, np.bool_)) for k in items)


def _device_key(key, device, xp):
    """The index with tensors, arrays and lists as arrays of the device (tensors evaluated)."""
    from lazytensor.core.operand import Operand
    items = key if isinstance(key, tuple) else (key,)
    out = []
    for k in items:
        if isinstance(k, Operand):
            it = evaluated(k)
            if it.device != device:
                raise ValueError(f"an index on {it.device!r} for a tensor on {device!r}: move one with "
                                 f"lt.asarray(x, device=...)")
            k = it.data
        elif isinstance(k, (np.ndarray, list)):
            k = np.asarray(k) if device == "cpu" else xp.asarray(np.asarray(k))
        if hasattr(k, "dtype") and k.dtype.kind not in "biu":
            raise IndexError("arrays used as indices must be of integer (or boolean) type")
        out.append(k)
    return tuple(out)


def getitem(x, key):
    """a[idx], a[mask]: a gather, as NumPy's advanced indexing (a copy). With a mask of a's shape it
    is lazy (lazytensor.ops.masked: the mask is evaluated for its count, a host sync on CUDA, and a
    stays an expression, so `y[mask] += e` fuses); otherwise x and the index are evaluated and the
    result is a new tensor."""
    from lazytensor.ops.masked import mask_gather, own_shape_mask
    mask = own_shape_mask(key, tuple(x.shape))
    if mask is not None:
        return mask_gather(x, mask)
    from lazytensor.ops.index_write import row_gather, row_index
    if row_index(key) is not None and len(x.shape):
        return row_gather(x, key)                               # lazy: `y[idx] += e` fuses
    t = evaluated(x)
    xp = array_module(t.device)
    return Tensor(xp.ascontiguousarray(t.data[_device_key(key, t.device, xp)]), t.device)


def setitem(dest, key, value) -> None:
    """y[mask] = v, y[idx] = v. With a mask of y's shape, a value of one element or built from
    gathers with the same mask (`y[mask] += e`, `y[mask] = x[mask] * 2`) is ONE fused kernel,
    y[...] = where(mask, v', y) (lazytensor.ops.masked); with one integer index array along the first
    axis, ONE scatter kernel computing v (lazytensor.ops.index_write); other keys and values are
    evaluated and scattered by the device's array library. Casting is the 'same_kind' rule of every assignment."""
    from lazytensor.core import dtypes as _dt
    from lazytensor.core.operand import Operand
    from lazytensor.ops.masked import fused_write, own_shape_mask
    mask = own_shape_mask(key, tuple(dest.shape))
    if mask is not None and fused_write(dest, mask, value):     # (fused_write counts the references to value)
        return
    from lazytensor.ops.index_write import fused_index_write, row_index
    if row_index(key) is not None:
        fused_index_write(dest, key, value)                     # ONE scatter kernel, e fused into it
        return
    if not getattr(getattr(dest.data, "flags", None), "writeable", True):
        raise ValueError("assignment destination is read-only")
    xp = array_module(dest.device)
    k = _device_key(key, dest.device, xp)
    if isinstance(value, Operand):
        v = evaluated(value)
        if v.device != dest.device:
            raise ValueError(f"cannot assign an expression on {v.device!r} to a tensor on {dest.device!r}")
        _dt.check_cast(v.dtype, dest.dtype)
        data = v.data
    else:
        data = np.asarray(value)
        if data.ndim or not isinstance(value, (int, float, bool)):
            _dt.check_cast(data.dtype, dest.dtype)
        if dest.device == "cuda":
            data = xp.asarray(data)
    dest.data[k] = data
