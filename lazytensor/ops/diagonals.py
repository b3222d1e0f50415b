"""np.diagonal, np.trace and np.diag. A diagonal is a view: the two axes merged into one (a
reshape) and read with a stride of one more than a row (a slice), so the kernel that reads it
does index arithmetic only; trace sums it in one reduction kernel; diag of a vector is an
elementwise `where` over the square."""
from __future__ import annotations

import operator

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import apply
from lazytensor.ops import reductions as _red
from lazytensor.ops.operands import operand
from lazytensor.ops.output import to_out
from lazytensor.ops.views import broadcast_to, getitem, moveaxis, reshape


def diagonal(a, offset=0, axis1=0, axis2=1):
    """np.diagonal: the offset-th diagonal of the matrices on axes (axis1, axis2), as the last axis
    of the result (a view)."""
    x = operand(a)
    nd = x.ndim
    if nd < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    a1, a2 = (operator.index(axis1), operator.index(axis2))
    for ax in (a1, a2):
        if not -nd <= ax < nd:
            raise np.exceptions.AxisError(ax, nd)
    a1, a2 = a1 % nd, a2 % nd
    if a1 == a2:
        raise ValueError("axis1 and axis2 cannot be the same")
    offset = operator.index(offset)
    x = moveaxis(x, (a1, a2), (-2, -1))
    rows, cols = x.shape[-2], x.shape[-1]
    length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    batch = tuple(x.shape[:-2])
    if length == 0:
        return reshape(getitem(reshape(x, batch + (rows * cols,)), (Ellipsis, slice(0, 0))), batch + (0,))
    start = offset if offset >= 0 else -offset * cols
    flat = reshape(x, batch + (rows * cols,))
    return getitem(flat, (Ellipsis, slice(start, start + (length - 1) * (cols + 1) + 1, cols + 1)))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """np.trace: the sum along the offset-th diagonal (np.sum's dtypes: small integers widen)."""
    return to_out(_red.reduce("sum", diagonal(a, offset, axis1, axis2), -1, False, dtype), out)


def diag(v, k=0):
    """np.diag: of a 2-D operand its k-th diagonal (a view); of a 1-D operand the square matrix
    with v on its k-th diagonal and zeros elsewhere."""
    x = operand(v)
    k = operator.index(k)
    if x.ndim == 2:
        return diagonal(x, k)
    if x.ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = x.shape[0] + abs(k)
    from lazytensor.ops.joining import concatenate
    tail = _tensor.zeros((abs(k),), x.dtype, x.device)
    padded = concatenate([x, tail]) if k else x
    # Element (i, i + k) is v[i] (k >= 0); element (j - k, j) is v[j] (k < 0).
    along = reshape(padded, (n, 1)) if k >= 0 else reshape(padded, (1, n))
    rows = _tensor.arange(n, device=x.device)
    on_diagonal = apply("equal", apply("subtract", reshape(rows, (1, n)), reshape(rows, (n, 1))), k)
    return apply("where", on_diagonal, broadcast_to(along, (n, n)), x.dtype.type(0))
