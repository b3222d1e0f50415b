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


def _sign_of(part):
    """NumPy 2's complex sign, its parts of the real type `part`: z / |z|; 0 for 0; NaN for a NaN
    modulus; an infinite modulus gives the direction of the infinite part (NaN where both are)."""
    @_inline
    def sign(z):
        r = part(z.real)
        i = part(z.imag)
        m = part(np.hypot(r, i))
        if m != m:
            return complex(np.nan, np.nan)
        if np.isinf(m):
            if np.isinf(r):
                if np.isinf(i):
                    return complex(np.nan, np.nan)
                return complex(1.0 if r > 0 else -1.0, 0.0)
            return complex(0.0, 1.0 if i > 0 else -1.0)
        if m == 0:
            return complex(0.0, 0.0)
        return complex(part(r / m), part(i / m))
    return sign


def _reciprocal_of(part):
    """NumPy's complex reciprocal loop (not its division: 1 / 0 is NaN there)."""
    @_inline
    def reciprocal(z):
        r = part(z.real)
        i = part(z.imag)
        if np.abs(i) <= np.abs(r):
            q = part(i / r)
            d = part(r + part(i * q))
            return complex(part(part(1) / d), part(-q / d))
        q = part(r / i)
        d = part(part(r * q) + i)
        return complex(part(q / d), part(part(-1) / d))
    return reciprocal


lt_csign64, lt_csign128 = _sign_of(np.float32), _sign_of(np.float64)
lt_crecip64, lt_crecip128 = _reciprocal_of(np.float32), _reciprocal_of(np.float64)


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
