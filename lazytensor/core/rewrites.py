"""Rewrites applied while an expression is built, declared in one table.

Each entry maps an op to a function that returns the replacement as (op, *operands), which the
node builder builds instead, or None to keep the op.
They are exact: the replacement computes bit-for-bit what NumPy computes for the original (NumPy
itself evaluates `x ** 2` as `np.square(x)`, much cheaper than a general pow).
"""
from __future__ import annotations


def _power(base, exponent):
    """x ** 2 as square(x) where the two have one dtype: a float x with a Python 2 or 2.0, an
    integer x with a Python 2 (an integer x ** 2.0 is float64, and np.power(bool x, 2) int64).
    np.power(x, 0.5) as sqrt(x) for a float32 or float64 x, as NumPy's power loops compute a scalar
    exponent of 0.5 (NaN at -inf and -0.0 at -0.0, where pow gives +inf and +0.0); its float16 loop
    calls pow."""
    if type(exponent) in (int, float) and not isinstance(base, (int, float, bool)):
        kind = base.dtype.kind
        if exponent == 2 and (kind == "f" or (kind in "iu" and type(exponent) is int)):
            return ("square", base)
        if type(exponent) is float and exponent == 0.5 and base.dtype.name in ("float32", "float64"):
            return ("sqrt", base)
    return None


def bool_squared(base, exponent) -> bool:
    """NumPy's `**` operator computes `x ** 2` (a Python int 2) as np.square(x), whatever x's
    dtype: for a bool x that is int8, where np.power gives int64."""
    return type(exponent) is int and exponent == 2 and base.dtype.kind == "b"


def operator_sqrt(base, exponent) -> bool:
    """NumPy's `**` operator computes a float array `x ** 0.5` as np.sqrt(x). np.power agrees for
    float32 and float64, not for float16, whose power loop gives pow's +inf at -inf (sqrt: NaN) and
    +0.0 at -0.0 (sqrt: -0.0)."""
    return type(exponent) is float and exponent == 0.5 and base.dtype.kind == "f"


def _logical(*operands):
    """No rewrite, NumPy's check: the logical ufuncs run a bool loop, yet NumPy converts a Python
    int operand to a C long first, so one beyond int64 raises OverflowError there."""
    for x in operands:
        if type(x) is int and not -2**63 <= x < 2**63:
            raise OverflowError(f"Python int too large to convert to C long: {x}")
    return None


REWRITES = {"power": _power, "logical_and": _logical, "logical_or": _logical, "logical_xor": _logical}
