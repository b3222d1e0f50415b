"""The standard's finfo and iinfo: NumPy's values, as Python floats and ints (NumPy's finfo gives
float32's limits as NumPy scalars), for a dtype, a dtype name or an array; bfloat16's from ml_dtypes."""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from lazytensor.core.dtypes import BFLOAT16, is_float


@dataclass(frozen=True)
class finfo_object:  # noqa: N801  (the standard's name)
    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


@dataclass(frozen=True)
class iinfo_object:  # noqa: N801
    bits: int
    max: int
    min: int
    dtype: np.dtype


def _dtype(x):
    """A dtype, a scalar type (np.float32), a name, or an array (its dtype)."""
    return np.dtype(x if isinstance(x, (type, np.dtype, str)) else x.dtype)


def finfo(x, /) -> finfo_object:
    dtype = _dtype(x)
    if dtype.kind == "c":       # the standard's: its real dtype's limits (complex64: float32's), as NumPy's
        dtype = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
    if not is_float(dtype):
        raise ValueError(f"finfo takes a floating-point dtype, not {dtype.name}; use iinfo for integers")
    f = ml_dtypes.finfo(dtype) if dtype == BFLOAT16 else np.finfo(dtype)
    return finfo_object(f.bits, float(f.eps), float(f.max), float(f.min), float(f.smallest_normal), dtype)


def iinfo(x, /) -> iinfo_object:
    dtype = _dtype(x)
    if dtype.kind not in "iu":
        raise ValueError(f"iinfo takes an integer dtype, not {dtype.name}; use finfo for floating point")
    i = np.iinfo(dtype)
    return iinfo_object(i.bits, int(i.max), int(i.min), dtype)
