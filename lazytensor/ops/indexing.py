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
