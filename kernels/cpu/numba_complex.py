"""Complex helpers that generated numba kernels call, with NumPy's meaning where numba's own differs:
division and reciprocal (np.divide: no ZeroDivisionError, NumPy's Smith algorithm), integer powers by
repeated multiplication (NumPy's npy_cpow: exact for small integer exponents), sign and absolute value
as NumPy 2 defines them. The CUDA twins are kernels/cuda/complex_prelude.py.
"""
import numpy as np
from numba import njit

_inline = njit(inline="always", cache=True, error_model="numpy")


@_inline
def lt_cdiv(a, b):
    return np.divide(a, b)


@_inline
def lt_cabs(z):
    return np.hypot(z.real, z.imag)


@_inline
def lt_csign(z, one):
    """z / |z|; 0 for 0; an infinite z points along its infinite axis (NaN where both are infinite).
    `one`: 1 of z's type."""
    r = z.real
    i = z.imag
    m = np.hypot(r, i)
    zero = one * 0
    if m != m or (np.isinf(r) and np.isinf(i)):
        return zero + complex(np.nan, np.nan)
    if np.isinf(r):
        return zero + (1.0 if r > 0 else -1.0)
    if np.isinf(i):
        return zero + (1j if i > 0 else -1j)
    if m == 0:
        return zero
    return np.divide(z, m)


@_inline
def lt_cpow(a, b, one):
    """npy_cpow: a ** 0 is 1; 0 ** b is 0 for a real positive b, else NaN; an integer exponent of
    magnitude below 100 by repeated squaring (the reciprocal for a negative one); else cpow.
    `one`: 1 of a's type."""
    br = b.real
    bi = b.imag
    if br == 0 and bi == 0:
        return one
    if a.real == 0 and a.imag == 0:
        if br > 0 and bi == 0:
            return one * 0
        return one * 0 + complex(np.nan, np.nan)
    if bi == 0 and br == np.floor(br) and -100 < br < 100:
        n = int(br)
        if n == 1:
            return a
        if n == 2:
            return a * a
        if n == 3:
            return a * a * a
        m = -n if n < 0 else n
        acc = one
        p = a
        mask = 1
        while True:
            if m & mask:
                acc = acc * p
            mask <<= 1
            if m < mask:
                break
            p = p * p
        return np.divide(one, acc) if n < 0 else acc
    return np.power(a, b)
