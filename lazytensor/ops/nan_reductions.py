"""NumPy's NaN-ignoring reductions and scans (np.nansum, nanmean, nanmax, nancumsum, ...): each
NaN is replaced by the reduction's identity in the expression feeding an ordinary reduction or
scan, so the replacement fuses into its kernel. Integer and bool operands have no NaN: they reduce
as the plain reductions.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.expr import apply, astype
from lazytensor.ops import reductions as _red
from lazytensor.ops.operands import operand
from lazytensor.ops.output import to_out


def _cast(x, dtype):
    return x if x.dtype == dtype else astype(x, dtype)


def _floating(x) -> bool:
    return x.dtype.kind in "fc"


def _filled(x, value):
    return apply("where", apply("isnan", x), value, x)


def _not_nan_count(x, axis, keepdims):
    """How many elements of each slice are not NaN, as int64."""
    return _red.reduce("sum", apply("logical_not", apply("isnan", x)), axis, keepdims, np.int64)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False):
    """np.nansum: the sum with NaNs counted as zero (an all-NaN slice sums to 0)."""
    x = operand(a)
    x = _filled(x, 0) if _floating(x) else x
    return to_out(_red.reduce("sum", x, axis, keepdims, dtype), out)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False):
    """np.nanprod: the product with NaNs counted as one."""
    x = operand(a)
    x = _filled(x, 1) if _floating(x) else x
    return to_out(_red.reduce("prod", x, axis, keepdims, dtype), out)


def _nan_extreme(kind, a, axis, out, keepdims):
    x = operand(a)
    if not _floating(x):
        return to_out(_red.reduce(kind, x, axis, keepdims), out)
    fill = -np.inf if kind == "max" else np.inf
    best = _red.reduce(kind, _filled(x, fill), axis, keepdims)
    # An all-NaN slice gives NaN, as NumPy's (which also warns); a slice of -inf and NaNs gives -inf.
    some = _red.reduce("any", apply("logical_not", apply("isnan", x)), axis, keepdims)
    return to_out(apply("where", some, best, np.nan), out)


def nanmax(a, axis=None, out=None, keepdims=False):
    """np.nanmax: the maximum ignoring NaNs; NaN where a slice is all NaN."""
    return _nan_extreme("max", a, axis, out, keepdims)


def nanmin(a, axis=None, out=None, keepdims=False):
    """np.nanmin: the minimum ignoring NaNs; NaN where a slice is all NaN."""
    return _nan_extreme("min", a, axis, out, keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    """np.nanmean: the mean of the elements that are not NaN; NaN where there are none."""
    x = operand(a)
    if not _floating(x):
        return to_out(_red.reduce("mean", x, axis, keepdims, dtype), out)
    want = _red.reduce("mean", x, axis, keepdims, dtype).dtype     # NumPy's result dtype of the mean
    total = _red.reduce("sum", _filled(x, 0), axis, keepdims, want)
    return to_out(_cast(apply("true_divide", total, _not_nan_count(x, axis, keepdims)), want), out)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """np.nanvar: the variance of the elements that are not NaN (two passes: the mean, then the
    squared deviations); NaN where fewer than ddof + 1 remain."""
    x = operand(a)
    if not _floating(x):
        return to_out(_red.reduce("var", x, axis, keepdims, dtype, ddof), out)
    want = _red.reduce("var", x, axis, keepdims, dtype).dtype
    count = _not_nan_count(x, axis, True)
    mean = apply("true_divide", _red.reduce("sum", _filled(x, 0), axis, True, np.float64), count)
    dev = apply("subtract", _cast(x, np.float64), mean)
    # Masked by x's NaNs, not the squares': inf - inf is NaN and stays in, as NumPy's.
    squares = _red.reduce("sum", apply("where", apply("isnan", x), 0.0, apply("multiply", dev, dev)), axis,
                          keepdims, np.float64)
    dof = apply("subtract", count if keepdims else _not_nan_count(x, axis, False), ddof)
    var = apply("where", apply("greater", dof, 0), apply("true_divide", squares, dof), np.nan)
    return to_out(_cast(var, want), out)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """np.nanstd: the square root of nanvar."""
    var = nanvar(a, axis, dtype, None, ddof, keepdims)
    return to_out(apply("sqrt", var), out)


def _nan_arg(kind, a, axis, out, keepdims):
    x = operand(a)
    if not _floating(x):
        return to_out(_red.reduce(kind, x, axis, keepdims), out)
    from lazytensor.assign.evaluate import evaluate
    best = _nan_extreme(kind[3:], x, axis, None, True)
    # The first element equal to the slice's extreme (NaN equals nothing, so NaNs are skipped).
    where = _red.reduce("argmax", apply("equal", x, best), axis, keepdims)
    result, all_nan = evaluate(where, _red.reduce("any", apply("isnan", best), None, False))
    if bool(all_nan.item()):
        raise ValueError("All-NaN slice encountered")
    return to_out(result, out)


def nanargmax(a, axis=None, out=None, *, keepdims=False):
    """np.nanargmax: the index of the maximum ignoring NaNs. Evaluated now (an int64 Tensor):
    NumPy's ValueError for an all-NaN slice depends on the values."""
    return _nan_arg("argmax", a, axis, out, keepdims)


def nanargmin(a, axis=None, out=None, *, keepdims=False):
    """np.nanargmin: the index of the minimum ignoring NaNs. Evaluated now, as nanargmax."""
    return _nan_arg("argmin", a, axis, out, keepdims)


def nancumsum(a, axis=None, dtype=None, out=None):
    """np.nancumsum: the running sum with NaNs counted as zero (one fused scan)."""
    from lazytensor.ops.scans import cumsum
    x = operand(a)
    return to_out(cumsum(_filled(x, 0) if _floating(x) else x, axis, dtype), out)


def nancumprod(a, axis=None, dtype=None, out=None):
    """np.nancumprod: the running product with NaNs counted as one (one fused scan)."""
    from lazytensor.ops.scans import cumprod
    x = operand(a)
    return to_out(cumprod(_filled(x, 1) if _floating(x) else x, axis, dtype), out)
