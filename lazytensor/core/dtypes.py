"""Supported dtypes and NumPy 2's promotion rules (NEP 50: Python scalars are weak); bfloat16 is
ml_dtypes', promoted as NumPy promotes it with ml_dtypes installed."""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.ops import ALL_DTYPES, BFLOAT16, COMPLEX_DTYPES, is_float  # noqa: F401 (is_float, BFLOAT16: for the rooms above)

SUPPORTED = frozenset(ALL_DTYPES + COMPLEX_DTYPES)
_NAMES = ", ".join(d.name for d in ALL_DTYPES + COMPLEX_DTYPES)


def check_supported(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if not dtype.isnative:
        raise TypeError(f"unsupported byte order of dtype {dtype.str!r} ({dtype.name}, big-endian): lazytensor "
                        f"computes in the machine's byte order; convert with x.astype(x.dtype.newbyteorder('='))")
    if dtype not in SUPPORTED:
        raise TypeError(f"unsupported dtype {dtype.name}: lazytensor supports {_NAMES}")
    return dtype


def operand_type(value):
    """The type NumPy's resolution sees for a scalar: weak `int`/`float`/`complex` for Python numbers,
    a strong dtype for NumPy scalars and Python bools."""
    if isinstance(value, np.generic):      # first: np.float64 is also a Python float, but strong
        return check_supported(value.dtype)
    if isinstance(value, bool):
        return np.dtype(bool)
    if isinstance(value, int):
        return int
    if isinstance(value, float):
        return float
    if isinstance(value, complex):
        return complex
    raise TypeError(f"unsupported operand of type {type(value).__name__}: expected a Tensor, an expression, "
                    f"or a bool, int, float or complex scalar")


def scalar_value(value, dtype: np.dtype):
    """A scalar converted to the loop dtype of the op that uses it, with NumPy's overflow check."""
    if isinstance(value, int) and not isinstance(value, bool) and dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError(f"Python integer {value} out of bounds for {dtype.name}")
    if isinstance(value, np.generic):
        value = value.item()
    return value


def check_cast(src: np.dtype, dst: np.dtype, what: str = "assign") -> None:
    if not np.can_cast(src, dst, casting="same_kind"):
        raise TypeError(f"cannot {what} {src.name} to {dst.name} under the 'same_kind' casting rule; "
                        f"use .astype({dst.name}) to convert explicitly")
