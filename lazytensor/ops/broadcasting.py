"""broadcast_shapes, broadcast_arrays, meshgrid and unstack: the shape operands broadcast to, and
several views of the operands, each as lazy as a view (broadcast_to, indexing), so no data moves
until a result is read."""
from __future__ import annotations

import operator

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.ops.views import broadcast_to, getitem, reshape


def broadcast_shapes(*shapes) -> tuple:
    """np.broadcast_shapes (the Array API's since 2025.12): the shape these shapes broadcast to;
    () for none, NumPy's ValueError where they do not broadcast."""
    return tuple(int(d) for d in np.broadcast_shapes(*shapes))


def broadcast_arrays(*arrays) -> tuple:
    """np.broadcast_arrays: every operand as a view of the shape they broadcast to."""
    nodes = [_tensor.as_node(a) for a in arrays]
    try:
        shape = np.broadcast_shapes(*(n.shape for n in nodes))
    except ValueError:
        raise ValueError("broadcast_arrays: shapes " + ", ".join(str(n.shape) for n in nodes)
                         + " cannot be broadcast together") from None
    return tuple(n if n.shape == shape else broadcast_to(n, shape) for n in nodes)


def meshgrid(*arrays, indexing="xy") -> tuple:
    """np.meshgrid of 1-D operands: coordinate grids as broadcast views (NumPy's copy=False, sparse=False)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    nodes = [_tensor.as_node(a) for a in arrays]
    for i, n in enumerate(nodes):
        if n.ndim != 1:
            raise ValueError(f"meshgrid takes 1-D arrays; argument {i} has shape {n.shape}")
    if len({n.dtype for n in nodes}) > 1 or len({n.device for n in nodes}) > 1:
        raise ValueError("meshgrid: the arrays must have one dtype and one device, got "
                         + ", ".join(f"{n.dtype.name} on {n.device}" for n in nodes))
    shape = [n.shape[0] for n in nodes]
    if indexing == "xy" and len(nodes) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, n in enumerate(nodes):
        axis = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and len(nodes) > 1 else i
        ones = [1] * len(nodes)
        ones[axis] = n.shape[0]
        out.append(broadcast_to(reshape(n, tuple(ones)), tuple(shape)))
    return tuple(out)


def unstack(x, axis=0) -> tuple:
    """The Array API's unstack: the slices of x along `axis`, each a view."""
    x = _tensor.as_node(x)
    if x.ndim == 0:
        raise ValueError("unstack needs an array of at least one dimension")
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise np.exceptions.AxisError(axis, x.ndim)
    axis %= x.ndim
    return tuple(getitem(x, (slice(None),) * axis + (i,)) for i in range(x.shape[axis]))
