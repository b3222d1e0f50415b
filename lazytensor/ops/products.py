"""tensordot, vecdot and matrix_transpose, built from lazy nodes that exist: tensordot is a matmul
of two reshaped views (transposes and reshapes cost nothing; the matmul is its heavy step), vecdot
is a product summed over one axis (one fused reduction kernel). Result dtypes are NumPy's promotion
of the operands, kept through the sum (NumPy's vecdot and tensordot do not widen integers)."""
from __future__ import annotations

import operator

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import apply
from lazytensor.core.expr import astype
from lazytensor.ops.matmul import matmul
from lazytensor.ops.reductions import reduce
from lazytensor.ops.views import broadcast_to, moveaxis, reshape, transpose


def matrix_transpose(x):
    """The last two axes swapped (the Array API's matrix_transpose, x.mT): a view."""
    x = _tensor.as_node(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose needs at least 2 dimensions, got shape {x.shape}")
    return transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def tensordot(a, b, axes=2):
    """np.tensordot: a and b contracted over `axes` (an int n: a's last n against b's first n; or
    two sequences of axes), as one matmul of the reshaped operands."""
    a, b = _tensor.as_node(a), _tensor.as_node(b)
    a_axes, b_axes = _contracted_axes(axes, a.ndim, b.ndim)
    for i, j in zip(a_axes, b_axes):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"tensordot: shape-mismatch for sum: axis {i} of a (size {a.shape[i]}) and axis {j} "
                             f"of b (size {b.shape[j]}) differ; shapes {a.shape} and {b.shape}")
    a_free = [i for i in range(a.ndim) if i not in a_axes]
    b_free = [j for j in range(b.ndim) if j not in b_axes]
    k = 1
    for i in a_axes:
        k *= a.shape[i]
    m = 1
    for i in a_free:
        m *= a.shape[i]
    n = 1
    for j in b_free:
        n *= b.shape[j]
    dtype = np.result_type(a.dtype, b.dtype)
    a2 = reshape(transpose(a, tuple(a_free) + tuple(a_axes)), (m, k))
    b2 = reshape(transpose(b, tuple(b_axes) + tuple(b_free)), (k, n))
    out = matmul(astype(a2, dtype), astype(b2, dtype))
    return reshape(out, tuple(a.shape[i] for i in a_free) + tuple(b.shape[j] for j in b_free))


def _contracted_axes(axes, a_nd, b_nd):
    if isinstance(axes, (int, np.integer)):
        n = operator.index(axes)
        if n < 0 or n > min(a_nd, b_nd):
            raise ValueError(f"tensordot: axes={n} must be between 0 and the smaller rank ({min(a_nd, b_nd)})")
        return tuple(range(a_nd - n, a_nd)), tuple(range(n))
    try:
        a_axes, b_axes = axes
    except (TypeError, ValueError):
        raise TypeError(f"tensordot: axes must be an int or a pair of axis sequences, got {axes!r}") from None
    a_axes = (a_axes,) if isinstance(a_axes, (int, np.integer)) else tuple(a_axes)
    b_axes = (b_axes,) if isinstance(b_axes, (int, np.integer)) else tuple(b_axes)
    if len(a_axes) != len(b_axes):
        raise ValueError(f"tensordot: {len(a_axes)} axes of a against {len(b_axes)} axes of b; give as many of each")
    norm = []
    for ax, nd, name in ((a_axes, a_nd, "a"), (b_axes, b_nd, "b")):
        out = []
        for i in ax:
            i = operator.index(i)
            if not -nd <= i < nd:
                raise np.exceptions.AxisError(i, nd, f"tensordot: axis of {name}")
            out.append(i % nd)
        if len(set(out)) != len(out):
            raise ValueError(f"tensordot: repeated axis in {name}'s axes {ax}")
        norm.append(tuple(out))
    return norm[0], norm[1]


def vecdot(x1, x2, axis=-1):
    """The Array API's vecdot (np.vecdot): sum(conj(x1) * x2) over `axis`, after the operands
    broadcast; one fused reduction kernel."""
    x1, x2 = _tensor.as_node(x1), _tensor.as_node(x2)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError("vecdot: the operands must have at least one dimension")
    axis = operator.index(axis)
    if not (-min(x1.ndim, x2.ndim) <= axis < 0):
        raise np.exceptions.AxisError(f"vecdot: axis {axis} must be negative and within both operands' ranks "
                                      f"(shapes {x1.shape} and {x2.shape})")
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"vecdot: the contracted axis {axis} differs in size: shapes {x1.shape} and {x2.shape}")
    shape = np.broadcast_shapes(x1.shape, x2.shape)
    dtype = np.result_type(x1.dtype, x2.dtype)
    if dtype == np.bool_:
        raise TypeError("vecdot takes numeric operands, not bool")
    if x1.dtype.kind == "c":
        x1 = apply("conjugate", x1)
    prod = broadcast_to(x1, shape) * broadcast_to(x2, shape)
    return reduce("sum", moveaxis(prod, axis, -1), axis=-1, dtype=dtype)
