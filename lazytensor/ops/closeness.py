"""np.isclose (lazy, elementwise: NumPy's formula with its handling of infinities and NaNs),
np.allclose and np.array_equal (Python bools, as NumPy's: their one reduction is evaluated now).
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.expr import apply, astype
from lazytensor.core.operand import Operand
from lazytensor.ops import reductions as _red
from lazytensor.ops.operands import operand


def _operand(x):
    return x if isinstance(x, (int, float, bool, complex)) else operand(x)     # Python scalars stay weak


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """np.isclose: |a - b| <= atol + rtol * |b| elementwise (b compared in floating point), equal
    infinities close, NaN close to NaN only with equal_nan."""
    x, y = _operand(a), _operand(b)
    if isinstance(y, Operand):
        want = np.result_type(y.dtype, 1.0)
        if y.dtype != want:
            y = astype(y, want)
    elif isinstance(y, int):
        y = float(y)
    close = apply("less_equal", apply("absolute", apply("subtract", x, y)),
                  apply("add", atol, apply("multiply", rtol, apply("absolute", y))))
    result = apply("logical_or", apply("logical_and", close, apply("isfinite", y)), apply("equal", x, y))
    if equal_nan:
        result = apply("logical_or", result, apply("logical_and", apply("isnan", x), apply("isnan", y)))
    return result


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """np.allclose: whether isclose holds everywhere, as a Python bool (evaluated now)."""
    return bool(_red.reduce("all", isclose(a, b, rtol, atol, equal_nan)).item())


def array_equal(a1, a2, equal_nan=False) -> bool:
    """np.array_equal: same shape and equal elements (NaNs equal with equal_nan), as a Python bool
    (evaluated now)."""
    x, y = _operand(a1), _operand(a2)
    if tuple(getattr(x, "shape", ())) != tuple(getattr(y, "shape", ())):
        return False
    same = apply("equal", x, y)
    if equal_nan and any(getattr(v, "dtype", np.dtype(float)).kind in "fc" for v in (x, y)):
        same = apply("logical_or", same, apply("logical_and", apply("isnan", x), apply("isnan", y)))
    return bool(_red.reduce("all", same).item())
