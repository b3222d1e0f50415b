"""The NumPy spellings of views: indexing, transposes, reshapes, broadcasts, expand/squeeze.

Each one checks its arguments as NumPy does and builds a view node (lazytensor.core.view_steps),
which costs nothing but index arithmetic in the kernel that reads it.
"""
from __future__ import annotations

import numpy as _np

from lazytensor.core import tensor as _tensor
from lazytensor.core.shapes import check_assignable
from lazytensor.core.view_steps import canonical_key, view


def getitem(x, key):
    from lazytensor.ops import indexing
    if indexing.is_advanced(key):
        return indexing.getitem(x, key)      # an index array or a mask: a gather, not a view
    return view(x, ("index", canonical_key(key)))


def transpose(x, axes=None):
    nd = len(x.shape)
    axes = tuple(range(nd))[::-1] if axes is None or axes == () else tuple(int(a) % nd for a in axes)
    if sorted(axes) != list(range(nd)):
        raise ValueError(f"axes {axes} don't match array of dimension {nd}")
    return view(x, ("transpose", axes))


def swapaxes(x, axis1, axis2):
    nd = len(x.shape)
    axes = list(range(nd))
    a, b = int(axis1) % nd, int(axis2) % nd
    axes[a], axes[b] = axes[b], axes[a]
    return transpose(x, tuple(axes))


def moveaxis(x, source, destination):
    nd = len(x.shape)
    src = [int(s) % nd for s in (source if isinstance(source, (tuple, list)) else (source,))]
    dst = [int(d) % nd for d in (destination if isinstance(destination, (tuple, list)) else (destination,))]
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, tuple(order))


def reshape(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    size = 1
    for d in x.shape:
        size *= d
    shape = tuple(int(d) for d in shape)
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if -1 in shape:
        known = 1
        for d in shape:
            if d != -1:
                known *= d
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    n = 1
    for d in shape:
        n *= d
    if n != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
    if shape == tuple(x.shape):
        return _tensor.as_node(x)
    return view(x, ("reshape", shape))


def ravel(x):
    return reshape(x, -1)


def broadcast_to(x, shape):
    shape = tuple(int(d) for d in shape)
    check_assignable(tuple(x.shape), shape)
    return view(x, ("broadcast", shape))


def expand_dims(x, axis):
    nd = len(x.shape)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out_nd = nd + len(axes)
    for a in axes:
        if not -out_nd <= int(a) < out_nd:      # as NumPy (AxisError is an IndexError and a ValueError)
            raise _np.exceptions.AxisError(int(a), out_nd)
    axes = sorted(int(a) % out_nd for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated axis in expand_dims: {axis}")
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return reshape(x, tuple(shape))


def squeeze(x, axis=None):
    shape = x.shape
    if axis is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    else:
        axes = [int(a) % len(shape) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
        for a in axes:
            if shape[a] != 1:
                raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    key = tuple(0 if i in axes else slice(None) for i in range(len(shape)))
    return getitem(x, key)


def flip(x, axis=None):
    """np.flip: the elements reversed along `axis` (None: every axis); a view, as NumPy's."""
    nd = len(x.shape)
    axes = range(nd) if axis is None else (axis if isinstance(axis, (tuple, list)) else (axis,))
    reversed_axes = set()
    for a in axes:
        if not -nd <= int(a) < nd:
            raise _np.exceptions.AxisError(int(a), nd)
        reversed_axes.add(int(a) % nd)
    return getitem(x, tuple(slice(None, None, -1) if d in reversed_axes else slice(None) for d in range(nd)))
