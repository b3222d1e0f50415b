"""np.average and np.ptp, composed from the reductions: each is one fused reduction kernel (two
for a weighted average: the weighted sum and the weights' sum) with the elementwise work around it.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import apply, astype
from lazytensor.ops import reductions as _red
from lazytensor.ops.operands import operand
from lazytensor.ops.output import to_out
from lazytensor.ops.views import broadcast_to, reshape, transpose


def ptp(a, axis=None, out=None, keepdims=False):
    """np.ptp: max - min along `axis` (int, tuple or None)."""
    x = operand(a)
    peak = apply("subtract", _red.reduce("max", x, axis, keepdims), _red.reduce("min", x, axis, keepdims))
    return to_out(peak, out)


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """np.average: the mean along `axis`, or the weighted mean sum(a * w) / sum(w). With weights,
    their sums are evaluated now to check that none is zero (NumPy's ZeroDivisionError)."""
    x = operand(a)
    if weights is None:
        avg = _red.reduce("mean", x, axis, keepdims)
        scale = avg.dtype.type(x.size / avg.size)
        return (avg, broadcast_to(_tensor.asarray(scale, device=x.device), avg.shape)) if returned else avg
    w = operand(weights) if not isinstance(weights, (list, tuple)) else _tensor.asarray(
        np.asarray(weights), device=x.device)
    if x.dtype.kind in "iub":
        dtype = np.result_type(x.dtype, w.dtype, np.float64)
    else:
        dtype = np.result_type(x.dtype, w.dtype)
    if tuple(w.shape) != tuple(x.shape):
        w = _aligned_weights(w, x, axis)
    total = _red.reduce("sum", w, axis, keepdims, dtype)
    avg = apply("true_divide", _red.reduce("sum", apply("multiply", astype(x, dtype), astype(w, dtype)), axis,
                                           keepdims, dtype), total)
    from lazytensor.assign.evaluate import evaluate
    avg, total, zero = evaluate(avg, total, _red.reduce("any", apply("equal", total, 0)))
    if bool(zero.item()):
        raise ZeroDivisionError("Weights sum to zero, can't be normalized")
    if returned:
        return avg, (total if tuple(total.shape) == tuple(avg.shape) else broadcast_to(total, avg.shape))
    return avg


def _aligned_weights(w, x, axis):
    """1-D weights along one axis, as NumPy takes them: broadcast to x's shape along that axis."""
    if axis is None:
        raise TypeError("Axis must be specified when shapes of a and weights differ.")
    axes = axis if isinstance(axis, tuple) else (axis,)
    axes = tuple(int(a) % x.ndim for a in axes)
    if tuple(w.shape) != tuple(x.shape[a] for a in axes):
        raise ValueError("Shape of weights must be consistent with shape of a along specified axis.")
    w = transpose(w, tuple(int(i) for i in np.argsort(axes)))
    shape = tuple(x.shape[i] if i in axes else 1 for i in range(x.ndim))
    return broadcast_to(reshape(w, shape), x.shape)
