"""np.diff: the n-th discrete difference along an axis, x[1:] - x[:-1] applied n times. Each
difference subtracts two views of the one before, so a first or second difference is one lazy
expression (one fused kernel when evaluated, reading x two or four times). Fused, the n-th would
read x 2**n times, so from the third on every second difference is evaluated into a tensor first.
prepend/append are joined to x first (lt.concatenate)."""
from __future__ import annotations

import operator

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import binary
from lazytensor.core.operand import Operand
from lazytensor.ops.device_arrays import evaluated
from lazytensor.ops.joining import concatenate
from lazytensor.ops.views import broadcast_to, getitem


def diff(x, n=1, axis=-1, prepend=None, append=None):
    """np.diff (the Array API's diff takes n and axis as keywords). bool elements differ by
    not_equal, as in NumPy."""
    x = _tensor.as_node(x)
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative but got {n}")
    if x.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise np.exceptions.AxisError(axis, x.ndim)
    axis %= x.ndim
    if n == 0:
        return x                # as NumPy: prepend and append are not joined either
    if prepend is not None or append is not None:
        parts = [_edge(p, x, axis) for p in (prepend,) if p is not None] + [x]
        parts += [_edge(p, x, axis) for p in (append,) if p is not None]
        x = concatenate(parts, axis=axis)
    before = (slice(None),) * axis
    for level in range(n):
        if level and level % 2 == 0:
            x = evaluated(x)
        hi, lo = getitem(x, before + (slice(1, None),)), getitem(x, before + (slice(None, -1),))
        x = binary("not_equal" if x.dtype == np.bool_ else "subtract", hi, lo)
    return x


def _edge(value, x, axis):
    """A prepend/append value as a tensor of x's shape but for `axis` (a scalar: one element long)."""
    v = value if isinstance(value, Operand) else _tensor.asarray(np.asarray(value), device=x.device)
    if v.ndim == 0:
        shape = list(x.shape)
        shape[axis] = 1
        v = broadcast_to(v, tuple(shape))
    return v
