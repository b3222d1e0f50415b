"""NumPy's ufuncs beyond the arithmetic core (logarithms of other bases, inverse trigonometry,
rounding, bit shifts, logical ops, ...): one op-table row each (kernels/ops.py), so they fuse like
every elementwise op. Also `round`, which NumPy builds from ufuncs and we do the same way."""
from __future__ import annotations

import numpy as _np

from lazytensor.core.expr import apply, astype


def _ufunc(op: str, arity: int):
    ufunc = getattr(_np, op)
    if arity == 1:
        def f(x):
            return apply(op, x)
    else:
        def f(a, b):
            return apply(op, a, b)
    f.__name__ = f.__qualname__ = op
    f.__doc__ = f"Elementwise np.{op}, lazily: " + (ufunc.__doc__ or "").strip().splitlines()[0]
    return f


log2 = _ufunc("log2", 1)
log10 = _ufunc("log10", 1)
exp2 = _ufunc("exp2", 1)
isinf = _ufunc("isinf", 1)
signbit = _ufunc("signbit", 1)
arcsin = _ufunc("arcsin", 1)
arccos = _ufunc("arccos", 1)
arctan = _ufunc("arctan", 1)
sinh = _ufunc("sinh", 1)
cosh = _ufunc("cosh", 1)
arcsinh = _ufunc("arcsinh", 1)
arccosh = _ufunc("arccosh", 1)
arctanh = _ufunc("arctanh", 1)
reciprocal = _ufunc("reciprocal", 1)
rint = _ufunc("rint", 1)
trunc = _ufunc("trunc", 1)
cbrt = _ufunc("cbrt", 1)
fabs = _ufunc("fabs", 1)
logical_not = _ufunc("logical_not", 1)
arctan2 = _ufunc("arctan2", 2)
hypot = _ufunc("hypot", 2)
fmod = _ufunc("fmod", 2)
copysign = _ufunc("copysign", 2)
nextafter = _ufunc("nextafter", 2)
logaddexp = _ufunc("logaddexp", 2)
logaddexp2 = _ufunc("logaddexp2", 2)
logical_and = _ufunc("logical_and", 2)
logical_or = _ufunc("logical_or", 2)
logical_xor = _ufunc("logical_xor", 2)
left_shift = _ufunc("left_shift", 2)
right_shift = _ufunc("right_shift", 2)


def round(x, decimals=0):  # noqa: A001  (NumPy's name)
    """np.round: half to even at `decimals` digits, as NumPy computes it (x * 10**decimals, rint,
    / 10**decimals in x's dtype; for negative decimals / then *). Integers stay integers: unchanged
    for decimals >= 0, else rounded in float64 and cast back (wrapping where the result leaves
    the dtype, as an astype does)."""
    decimals = _decimals(decimals)
    dtype = x.dtype if hasattr(x, "dtype") else _np.result_type(x)
    if dtype == _np.dtype(bool):
        raise TypeError("round is not defined for bool (NumPy cannot cast its float64 result back to bool); "
                        "convert first with x.astype(lt.float64)")
    if dtype.kind in "iu":
        if decimals >= 0:
            return apply("trunc", x)        # the integers themselves, as a new node
        return astype(_scaled_rint(astype(x, _np.float64), decimals), dtype)
    if decimals == 0:
        return apply("rint", x)             # of a complex x, each part rounded (NumPy's, the standard's)
    if dtype.kind == "c":
        # NumPy scales and rounds each part on its own; a complex product by 10**decimals would turn an
        # infinite part's partner into NaN.
        raise NotImplementedError("round: complex values round with decimals=0 only in lazytensor "
                                  "(round lt.real(x) and lt.imag(x) apart)")
    return _scaled_rint(x, decimals)


def _scaled_rint(x, decimals):
    factor = 10.0 ** abs(decimals)
    if decimals >= 0:
        return apply("true_divide", apply("rint", apply("multiply", x, factor)), factor)
    return apply("multiply", apply("rint", apply("true_divide", x, factor)), factor)


def _decimals(decimals) -> int:
    if isinstance(decimals, bool) or not isinstance(decimals, (int, _np.integer)):
        raise TypeError(f"round: decimals must be an int, not {type(decimals).__name__}")
    return int(decimals)


around = round
