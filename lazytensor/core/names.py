"""NumPy's names for the dtypes lazytensor supports and its constants, so code written against
NumPy reads the same with `lt.` (`x.astype(lt.float32)`, `x[:, lt.newaxis]`, `lt.pi * r ** 2`).

The dtype names are NumPy's scalar types themselves: np.dtype(lt.float32) is float32, and a value
made with one (`lt.float32(2)`) is a strong NumPy scalar in expressions, as in NumPy.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

bool_ = np.bool_
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
float16, float32, float64 = np.float16, np.float32, np.float64
complex64, complex128 = np.complex64, np.complex128
bfloat16 = ml_dtypes.bfloat16     # as JAX spells it: ml_dtypes' scalar type, np.dtype(lt.bfloat16) its dtype

newaxis = None
pi = math.pi
e = math.e
inf = math.inf
nan = math.nan

DTYPE_NAMES = ("bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "float32", "float64", "bfloat16", "complex64", "complex128")
CONSTANT_NAMES = ("newaxis", "pi", "e", "inf", "nan")
