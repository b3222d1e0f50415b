"""Complex helpers that generated numba kernels call, with NumPy's meaning where numba's own differs:
division and reciprocal (np.divide: no ZeroDivisionError, NumPy's Smith algorithm), integer powers by
repeated multiplication (NumPy's npy_cpow: exact for small integer exponents), sign and absolute value
as NumPy 2 defines them. The CUDA twins are kernels/cuda/complex_prelude.py.
"""
import numpy as np
from numba import njit

_inline = njit(inline="always", cache=True, error_model="numpy")


def _quotient_of(part):
    """NumPy's complex division loop (Smith's algorithm; a zero divisor divides by |0|, so +inf or NaN
    parts), in the parts' real type."""
    @_inline
    def quotient(a, b):
        ar = part(a.real)
        ai = part(a.imag)
        br = part(b.real)
        bi = part(b.imag)
        abr = np.abs(br)
        abi = np.abs(bi)
        if abr >= abi:
            if abr == 0 and abi == 0:
                return complex(part(ar / abr), part(ai / abr))
            rat = part(bi / br)
            scl = part(part(1.0) / part(br + part(bi * rat)))
            return complex(part(part(ar + part(ai * rat)) * scl), part(part(ai - part(ar * rat)) * scl))
        rat = part(br / bi)
        scl = part(part(1.0) / part(bi + part(br * rat)))
        return complex(part(part(part(ar * rat) + ai) * scl), part(part(part(ai * rat) - ar) * scl))
    return quotient


lt_cdiv64, lt_cdiv128 = _quotient_of(np.float32), _quotient_of(np.float64)


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
    """npy_cpow: a ** 0 is 1; 0 ** b is 0 where b's real part is positive, else NaN; an integer exponent of
    magnitude below 100 by repeated squaring (the reciprocal for a negative one); else cpow.
    `one`: 1 of a's type."""
    br = b.real
    bi = b.imag
    if br == 0 and bi == 0:
        return one
    if a.real == 0 and a.imag == 0:
        if br > 0:
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


# numba's complex exp and hyperbolic functions multiply an infinite part by sin(0) or cos(inf): on an axis
# (a zero part) C99's Annex G (glibc's, so NumPy's) gives the real function's value and keeps the zero.
# The circular functions are the hyperbolic ones of i z: sin z = -i sinh(i z), cos z = cosh(i z),
# tan z = -i tanh(i z).
@_inline
def lt_cexp(z):
    x = z.real
    y = z.imag
    if y == 0:
        return complex(np.exp(x), y)
    if 700 < x < np.inf:        # e^x alone overflows where e^x cos y may not: two halves (glibc scales too)
        h = np.exp(x / 2)
        return complex(h * np.cos(y) * h, h * np.sin(y) * h)
    return np.exp(z)


@_inline
def lt_csinh(z):
    x = z.real
    y = z.imag
    if y == 0:
        return complex(np.sinh(x), y)
    if x == 0:
        return complex(x, np.sin(y))
    if np.isinf(x) and not np.isfinite(y):
        return complex(np.abs(x), np.nan)
    if 700 < np.abs(x) < np.inf and np.isfinite(y):     # sinh x overflows where sinh x cos y may not
        h = np.exp(np.abs(x) / 2)
        return complex(np.copysign(0.5, x) * h * np.cos(y) * h, 0.5 * h * np.sin(y) * h)
    return np.sinh(z)


@_inline
def lt_ccosh(z):
    x = z.real
    y = z.imag
    if y == 0:
        if x != x:
            return complex(x, y)
        return complex(np.cosh(x), (1.0 if x > 0 else (-1.0 if x < 0 else 0.0)) * y if x != 0 else x * y)
    if x == 0:
        return complex(np.cos(y), x * np.sin(y) if np.isfinite(y) else 0.0)
    if np.isinf(x) and not np.isfinite(y):
        return complex(np.abs(x), np.nan)
    if 700 < np.abs(x) < np.inf and np.isfinite(y):
        h = np.exp(np.abs(x) / 2)
        return complex(0.5 * h * np.cos(y) * h, np.copysign(0.5, x) * h * np.sin(y) * h)
    return np.cosh(z)


@_inline
def lt_ctanh(z):
    x = z.real
    y = z.imag
    if y == 0:
        return complex(np.tanh(x), y)
    if x == 0:
        return complex(x, np.tan(y))
    if np.abs(x) > 22:         # tanh x is 1 in double; the imaginary part 4 sin y cos y e^(-2|x|) (Kahan)
        if not np.isfinite(y):
            if np.isinf(x):
                return complex(np.copysign(1.0, x), np.copysign(0.0, y))
            return complex(np.nan, np.nan)
        return complex(np.copysign(1.0, x), 4 * np.sin(y) * np.cos(y) * np.exp(-2 * np.abs(x)))
    return np.tanh(z)


@_inline
def lt_csin(z):
    if np.isinf(z.imag) and not np.isfinite(z.real):
        return complex(np.nan, np.inf)
    s = lt_csinh(complex(-z.imag, z.real))
    return complex(s.imag, -s.real)


@_inline
def lt_ccos(z):
    return lt_ccosh(complex(-z.imag, z.real))


@_inline
def lt_ctan(z):
    t = lt_ctanh(complex(-z.imag, z.real))
    return complex(t.imag, -t.real)


@_inline
def _sqrt(z):
    """The principal square root of finite z, the imaginary part's sign z's (of a -0 too, as C99's csqrt)."""
    x = z.real
    y = z.imag
    if x == 0 and y == 0:
        return complex(0.0, y)
    t = np.sqrt((np.abs(x) + np.hypot(x, y)) * 0.5)
    if x >= 0:
        return complex(t, y / (2 * t))
    return complex(np.abs(y) / (2 * t), np.copysign(t, y))


@_inline
def lt_carccosh(z):
    """Kahan's acosh: asinh(re(conj(sqrt(z - 1)) sqrt(z + 1))) + 2i atan2(im sqrt(z - 1), re sqrt(z + 1)),
    accurate near z = 1 and for large z (numba's log formula is neither, and takes another branch on
    part of the plane)."""
    a = _sqrt(complex(z.real - 1, z.imag))     # (z - 1 would add +0 to a -0 imaginary part)
    b = _sqrt(complex(z.real + 1, z.imag))
    return complex(np.arcsinh(a.real * b.real + a.imag * b.imag), 2 * np.arctan2(a.imag, b.real))


def _expm1_of(part):
    """NumPy's nc_expm1 in the parts' type: expm1(x) cos y - 2 sin^2(y / 2) + i e^x sin y."""
    @_inline
    def expm1(z):
        x = part(z.real)
        y = part(z.imag)
        a = part(np.sin(part(y / part(2.0))))
        re = part(part(part(np.expm1(x)) * part(np.cos(y))) - part(part(part(2.0) * a) * a))
        return complex(re, part(part(np.exp(x)) * part(np.sin(y))))
    return expm1


def _exp2_of(part):
    """NumPy's nc_exp2: exp(x ln 2 + i y ln 2), the products rounded to the parts' type (the angle of a
    large y is NumPy's only so)."""
    @_inline
    def exp2(z):
        return lt_cexp(complex(part(part(z.real) * part(0.6931471805599453)), part(part(z.imag) * part(0.6931471805599453))))
    return exp2


lt_cexpm1_64, lt_cexpm1_128 = _expm1_of(np.float32), _expm1_of(np.float64)
lt_cexp2_64, lt_cexp2_128 = _exp2_of(np.float32), _exp2_of(np.float64)


def _log1p_of(part):
    """NumPy's nc_log1p in the parts' type: log |1 + z| + i atan2(y, 1 + x)."""
    @_inline
    def log1p(z):
        x = part(z.real)
        y = part(z.imag)
        one = part(x + part(1.0))
        return complex(part(np.log(part(np.hypot(one, y)))), part(np.arctan2(y, one)))
    return log1p


lt_clog1p64, lt_clog1p128 = _log1p_of(np.float32), _log1p_of(np.float64)


@_inline
def lt_clog(z):
    """log |z| + i arg z; near |z| = 1 through log1p((x - 1)(x + 1) + y^2), as glibc, without the
    cancellation of log(|z|)."""
    x = z.real
    y = z.imag
    m = np.hypot(x, y)
    if 0.5 < m < 2.0:
        return complex(0.5 * np.log1p((x - 1.0) * (x + 1.0) + y * y), np.arctan2(y, x))
    return np.log(z)


@_inline
def lt_clog2(z):
    w = lt_clog(z)
    return complex(w.real * 1.4426950408889634, w.imag * 1.4426950408889634)


@_inline
def lt_clog10(z):
    w = lt_clog(z)
    return complex(w.real * 0.4342944819032518, w.imag * 0.4342944819032518)
