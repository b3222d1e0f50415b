"""NumPy-style functions. Each builds a node; nothing is computed until assignment."""
from __future__ import annotations

import numpy as _np

from lazytensor.core.expr import apply, astype, unary, unary_function  # noqa: F401  (astype is part of the public API)


def _unary(op: str, doc: str):
    f = unary_function(op)      # (the node builder itself: one Python call per function a user writes)
    f.__doc__ = doc
    return f


exp = _unary("exp", "Elementwise e**x.")
log = _unary("log", "Elementwise natural logarithm.")
log1p = _unary("log1p", "Elementwise log(1 + x), accurate near 0.")
expm1 = _unary("expm1", "Elementwise exp(x) - 1, accurate near 0.")
sqrt = _unary("sqrt", "Elementwise square root.")
sin = _unary("sin", "Elementwise sine.")
cos = _unary("cos", "Elementwise cosine.")
tan = _unary("tan", "Elementwise tangent.")
tanh = _unary("tanh", "Elementwise hyperbolic tangent.")
sigmoid = _unary("sigmoid", "Elementwise 1 / (1 + exp(-x)).")
relu = _unary("relu", "Elementwise max(x, 0); NaN stays NaN, as np.maximum(x, 0).")
sign = _unary("sign", "Elementwise sign: -1, 0 or 1 (NaN for NaN).")
floor = _unary("floor", "Elementwise floor.")
ceil = _unary("ceil", "Elementwise ceiling.")
isnan = _unary("isnan", "Elementwise test for NaN.")
isfinite = _unary("isfinite", "Elementwise test for finite values.")
absolute = abs = _unary("absolute", "Elementwise absolute value.")
negative = _unary("negative", "Elementwise -x.")
invert = _unary("invert", "Elementwise bitwise (or, for bool, logical) not.")


def maximum(a, b):
    """Elementwise maximum; NaN propagates, as np.maximum."""
    return apply("maximum", a, b)


def minimum(a, b):
    """Elementwise minimum; NaN propagates, as np.minimum."""
    return apply("minimum", a, b)


def where(condition, a=None, b=None):
    """Elementwise `a if condition else b`, as np.where with three arguments; with the condition
    alone, np.nonzero(condition) (evaluated: its size depends on the data)."""
    if a is None and b is None:
        from lazytensor.ops.indexing import nonzero
        return nonzero(condition)
    if a is None or b is None:
        raise ValueError("either both or neither of x and y should be given")
    return apply("where", apply("not_equal", condition, False) if _not_bool(condition) else condition, a, b)


def clip(x, a_min=None, a_max=None):
    """np.clip: minimum(maximum(x, a_min), a_max); either bound may be None, and with neither
    x comes back unchanged (as the Array API's clip)."""
    if a_min is None and a_max is None:
        return x
    # NumPy promotes the three operands together (np.clip(bool, 0, int8) is int8), not pairwise.
    dtype = _np.result_type(*(_weak(v) for v in (x, a_min, a_max) if v is not None))
    integer_x = getattr(x, "dtype", dtype).kind in "iu"
    if getattr(x, "dtype", dtype) != dtype:
        x = astype(x, dtype)
    if integer_x and dtype.kind in "iu":       # as NumPy: a Python int bound beyond an integer x's range clips nothing
        info = _np.iinfo(dtype)
        if type(a_min) is int and a_min < info.min:
            a_min = None
        if type(a_max) is int and a_max > info.max:
            a_max = None
    if a_min is not None:
        x = apply("maximum", x, a_min)
    if a_max is not None:
        x = apply("minimum", x, a_max)
    return x


def _weak(v):
    """What np.result_type needs to treat a Python int or float as weak (NEP 50)."""
    if type(v) is int or type(v) is float or type(v) is complex:
        return type(v)(0)
    return v.dtype if hasattr(v, "dtype") else v


def _not_bool(x) -> bool:
    import numpy as np
    dtype = getattr(x, "dtype", None)
    return dtype is not None and dtype != np.dtype(bool)
