"""logsumexp, log_softmax, softmax and cross_entropy, composed from lazy ops (max, exp, sum, log).

They add no node of their own: each is a max reduction, a sum reduction whose elementwise input
(exp(x - max)) runs inside the reduction kernel, and one fused kernel for what follows. Their
gradients therefore follow from the elementwise and reduction rules.

Numerical stability: the values are shifted by the maximum over the axis before exp, so no finite
input overflows. Where that maximum is not finite (a slice of all -inf, a +inf, a NaN), the shift is
0 instead, so the results are those of the mathematical formula: logsumexp of all -inf is -inf,
with a +inf it is +inf, with a NaN it is NaN (as scipy.special.logsumexp); softmax and log_softmax
of such a slice are NaN where the formula is inf - inf or 0 / 0 (as PyTorch).
"""
from __future__ import annotations

import functools

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import apply
from lazytensor.ops.reductions import reduce
from lazytensor.ops.views import getitem
from lazytensor.core.dtypes import is_float


def _float_operand(x, what: str):
    x = _tensor.as_node(x)
    if not is_float(x.dtype):
        raise TypeError(f"{what} takes floating-point input; got {x.dtype.name}: convert it with "
                        f".astype(np.float32) (or float64) first")
    return x


def _shifted(x, axis):
    """x - m with m the maximum over `axis` (kept), or 0 where that maximum is not finite."""
    m = reduce("max", x, axis, keepdims=True)
    safe = apply("where", apply("isfinite", m), m, 0)
    return apply("subtract", x, safe), safe


def logsumexp(x, axis=-1, keepdims=False):
    """log(sum(exp(x), axis)), computed without overflow. axis: an int, a tuple of ints, or None
    for all axes (as scipy.special.logsumexp)."""
    x = _float_operand(x, "logsumexp")
    shifted, safe = _shifted(x, axis)
    total = reduce("sum", apply("exp", shifted), axis, keepdims=True)
    result = apply("add", apply("log", total), safe)
    if keepdims:
        return result
    return reduce_kept_axes(result, axis)


def reduce_kept_axes(kept, axis):
    """Drop the unit axes a keepdims reduction over `axis` left in `kept` (a view, no copy)."""
    nd = len(kept.shape)
    axes = range(nd) if axis is None else [int(a) % nd for a in (axis if isinstance(axis, tuple) else (axis,))]
    return getitem(kept, tuple(0 if i in axes else slice(None) for i in range(nd)))


def log_softmax(x, axis=-1):
    """x - logsumexp(x, axis, keepdims=True), computed as (x - max) - log(sum(exp(x - max)))."""
    x = _float_operand(x, "log_softmax")
    shifted, _ = _shifted(x, axis)
    total = reduce("sum", apply("exp", shifted), axis, keepdims=True)
    return apply("subtract", shifted, apply("log", total))


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x), axis), computed as exp(x - max) / sum(exp(x - max))."""
    x = _float_operand(x, "softmax")
    shifted, _ = _shifted(x, axis)
    e = apply("exp", shifted)
    return apply("true_divide", e, reduce("sum", e, axis, keepdims=True))


@functools.lru_cache(maxsize=64)
def _classes(c: int, device) -> "_tensor.Tensor":
    """arange(c) on the device, made once: a training loop builds its loss on every step, and a new
    arange each time was a host-to-device copy per step and a new tensor in the plan's signature
    (a new address for graph replay). Nothing writes it (it is not the user's)."""
    return _tensor.arange(c, dtype=np.int64, device=device)


def cross_entropy(logits, labels):
    """The mean over the batch of -log_softmax(logits)[n, labels[n]] (PyTorch's F.cross_entropy with
    its defaults). logits: floating (N, C); labels: integer (N,), each in [0, C). The label's column
    is selected by comparing labels with arange(C) (no gather); a label outside [0, C) makes the
    result NaN (it cannot raise: the labels are not read until the loss is evaluated)."""
    logits = _float_operand(logits, "cross_entropy")
    labels = _tensor.as_node(labels)
    if len(logits.shape) != 2:
        raise ValueError(f"cross_entropy expects logits of shape (batch, classes); got {tuple(logits.shape)}")
    if labels.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy expects integer class labels; got {labels.dtype.name} (for "
                        f"probabilities, write -(p * lt.log_softmax(logits)).sum(axis=1).mean())")
    n, c = logits.shape
    if tuple(labels.shape) != (n,):
        raise ValueError(f"cross_entropy: labels must have shape ({n},), one class per row of logits "
                         f"{tuple(logits.shape)}; got {tuple(labels.shape)}")
    if n == 0:
        raise ValueError("cross_entropy of an empty batch: the mean over zero rows is undefined")
    column = getitem(labels, (slice(None), None))                         # (N, 1)
    classes = _classes(c, logits.device)
    chosen = apply("equal", column, classes)                              # (N, C) one-hot, bool
    picked = reduce("sum", apply("where", chosen, log_softmax(logits, axis=1), 0), 1)
    valid = apply("bitwise_and", apply("greater_equal", labels, 0), apply("less", labels, c))
    per_row = apply("where", valid, apply("negative", picked), np.nan)
    return reduce("mean", per_row, None)
