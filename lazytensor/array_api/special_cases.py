"""Where the Array API standard's special cases differ from NumPy's, the namespace follows the
standard (lazytensor's own `lt` functions and a tensor's operators follow NumPy). Each function is
NumPy's node with the cases that differ replaced in the same lazy expression (one fused kernel).

floor_divide: NumPy computes floor(x1 / x2) through fmod, so an infinite operand gives NaN
(inf // 2) or -1.0 (1 // -inf); the standard gives x1 / x2 there: +-infinity and +-0.
"""
from __future__ import annotations

import math

from lazytensor.core.expr import apply
from lazytensor.core.operand import Operand
from lazytensor.core.dtypes import is_float


def floor_divide(x1, x2, /):
    quotient = apply("floor_divide", x1, x2)
    if not is_float(quotient.dtype):
        return quotient
    infinite = _either(_isinf(x1), _isinf(x2))
    if infinite is False:
        return quotient
    return apply("where", infinite, apply("true_divide", x1, x2), quotient)


def _isinf(x):
    """isinf as a lazy node for an operand, as a Python bool for a Python scalar."""
    if isinstance(x, Operand):
        return apply("isinf", x) if is_float(x.dtype) else False
    return isinstance(x, float) and math.isinf(x)


def _either(a, b):
    if a is True or b is True:
        return True
    if a is False:
        return b
    if b is False:
        return a
    return apply("logical_or", a, b)
