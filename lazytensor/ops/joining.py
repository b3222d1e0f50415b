"""Joining tensors: concatenate, stack, hstack, vstack, as NumPy's.

concatenate is lazy: a heavy node whose plan (lazytensor.plan.heavy.concatenate) evaluates each part,
its own expression fused in, straight into its slice of the result (one kernel per part, no
temporary per part). stack, hstack and vstack are concatenations of views of the parts. The result
dtype is NumPy's (np.result_type of the parts) and the shapes are checked as NumPy checks them."""
from __future__ import annotations

import numpy as np

from lazytensor.core.expr import Expr
from lazytensor.core.operand import Operand
from lazytensor.core.tensor import Tensor, as_node
from lazytensor.ops.views import expand_dims, ravel, reshape


def _parts(arrays, what):
    if isinstance(arrays, Operand) or not hasattr(arrays, "__len__"):
        raise TypeError(f"{what} takes a sequence of tensors, e.g. {what}([a, b])")
    parts = [as_node(a) for a in arrays]
    if not parts:
        raise ValueError("need at least one array to concatenate")
    devices = {p.device for p in parts}
    if len(devices) > 1:
        raise ValueError(f"{what} mixes devices {sorted(devices)}: move the parts to one with lt.asarray(x, device=...)")
    return parts


def concatenate(arrays, axis=0, dtype=None):
    """np.concatenate: the parts joined along an existing axis (axis=None: flattened first), lazily."""
    parts = _parts(arrays, "concatenate")
    if axis is None:
        parts, axis = [ravel(p) for p in parts], 0
    nd = parts[0].ndim
    if nd == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    if not -nd <= axis < nd:
        raise np.exceptions.AxisError(axis, nd)
    axis %= nd
    for i, p in enumerate(parts):
        if p.ndim != nd:
            raise ValueError(f"all the input array dimensions except for the concatenation axis must match "
                             f"exactly, but along dimension 0, the array at index 0 has {nd} dimension(s) "
                             f"and the array at index {i} has {p.ndim} dimension(s)")
        for d in range(nd):
            if d != axis and p.shape[d] != parts[0].shape[d]:
                raise ValueError(f"all the input array dimensions except for the concatenation axis must match "
                                 f"exactly, but along dimension {d}, the array at index 0 has size "
                                 f"{parts[0].shape[d]} and the array at index {i} has size {p.shape[d]}")
    out_dtype = np.result_type(*(p.dtype for p in parts)) if dtype is None else np.dtype(dtype)
    shape = list(parts[0].shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    return Expr("concatenate", tuple(parts), tuple(shape), out_dtype, parts[0].device, heavy=True, attrs=axis)


def stack(arrays, axis=0):
    """np.stack: the parts (of one shape) joined along a new axis."""
    parts = _parts(arrays, "stack")
    if len({p.shape for p in parts}) > 1:
        raise ValueError("all input arrays must have the same shape")
    nd = parts[0].ndim + 1
    if not -nd <= axis < nd:
        raise np.exceptions.AxisError(axis, nd)
    return concatenate([expand_dims(p, axis % nd) for p in parts], axis=axis % nd)


def hstack(arrays):
    """np.hstack: along axis 1, or axis 0 for 1-D parts."""
    parts = [_at_least_1d(p) for p in _parts(arrays, "hstack")]
    return concatenate(parts, axis=0 if parts[0].ndim == 1 else 1)


def vstack(arrays):
    """np.vstack: along axis 0, 1-D parts as rows."""
    parts = [_at_least_1d(p) for p in _parts(arrays, "vstack")]
    return concatenate([reshape(p, (1, p.shape[0])) if p.ndim == 1 else p for p in parts], axis=0)


def _at_least_1d(p):
    return reshape(p, (1,)) if p.ndim == 0 else p


# -- copies in a new arrangement, by the device's array library -----------------------------------------

def roll(x, shift, axis=None) -> Tensor:
    """np.roll: elements shifted along `axis` (None: of the flattened x), wrapping around."""
    return _library("roll", x, shift, axis=axis)


def repeat(x, repeats, axis=None) -> Tensor:
    """np.repeat: each element repeated `repeats` times along `axis` (None: of the flattened x)."""
    if not isinstance(repeats, (int, np.integer)):
        repeats = np.asarray(repeats)
    return _library("repeat", x, repeats, axis=axis)


def tile(x, reps) -> Tensor:
    """np.tile: x repeated `reps` times along each axis."""
    return _library("tile", x, reps)


def _library(name, x, *args, **kwargs) -> Tensor:
    from lazytensor.ops.device_arrays import array_module, evaluated
    t = evaluated(x)
    xp = array_module(t.device)
    if t.device == "cuda":
        args = tuple(xp.asarray(a) if isinstance(a, np.ndarray) else a for a in args)
    return Tensor(getattr(xp, name)(t.data, *args, **kwargs), t.device)
