"""Scalar helpers that generated numba kernels call: NumPy's exact semantics where plain Python
or C would differ (integer division by zero, floor division of floats, float16 rounding).

numba has no float16 or bfloat16 type on the CPU, so their arrays travel as their uint16 bit
patterns and these helpers convert, rounding to nearest-even exactly as NumPy (and ml_dtypes) do.
"""
import math

import numpy as np
from numba import njit

_inline = njit(inline="always", cache=True, error_model="numpy")


@_inline
def lt_h2f(h):
    h = np.uint32(h)
    sign = (h >> 15) & 1
    exp = (h >> 10) & 0x1F
    mant = h & 0x3FF
    if exp == 0:
        v = mant * 5.960464477539063e-08            # mant * 2**-24, subnormal
    elif exp == 31:
        v = np.inf if mant == 0 else np.nan
    else:
        v = (1024 + mant) * 2.0 ** (np.int64(exp) - 25)
    return np.float32(-v if sign else v)


@_inline
def lt_f2h(x):
    x = np.float64(x)
    if x != x:
        return np.uint16(0x7E00)
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    if a >= 65520.0:                                  # rounds to inf (65504 is the largest half)
        return np.uint16(sign | 0x7C00)
    if a < 6.103515625e-05:                           # below 2**-14: subnormal, quantum 2**-24
        return np.uint16(sign | np.int64(np.rint(a * 16777216.0)))
    m, e = math.frexp(a)                              # a = m * 2**e, m in [0.5, 1)
    q = np.int64(np.rint(m * 2048.0))                 # 11 significant bits, in [1024, 2048]
    return np.uint16(sign | (((e + 14) << 10) + q - 1024))   # q == 2048 carries into the exponent


@_inline
def lt_round_f16(x):
    return lt_h2f(lt_f2h(x))


@_inline
def lt_bf2f(b):
    """bfloat16 bits -> float32: the upper half of the float32's bits."""
    return np.uint32(np.uint32(b) << np.uint32(16)).view(np.float32)


@_inline
def lt_f2bf(x):
    """float32 -> bfloat16 bits, to nearest even; a NaN becomes the quiet NaN of its sign (ml_dtypes')."""
    u = np.float32(x).view(np.uint32)
    if x != x:
        return np.uint16(((u >> np.uint32(16)) & np.uint32(0x8000)) | np.uint32(0x7FC0))
    return np.uint16((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))


@_inline
def lt_d2bf(x):
    """float64 -> bfloat16 bits rounded once, as ml_dtypes casts a double (float32 first would round twice)."""
    x = np.float64(x)
    if x != x:
        return np.uint16(0xFFC0 if math.copysign(1.0, x) < 0 else 0x7FC0)
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    if a >= 3.39617752923046e+38:                     # halfway above the largest bfloat16: inf
        return np.uint16(sign | 0x7F80)
    if a < 1.1754943508222875e-38:                    # below 2**-126: subnormal, quantum 2**-133
        return np.uint16(sign | np.int64(np.rint(a * 1.0889035741470031e+40)))
    m, e = math.frexp(a)                              # a = m * 2**e, m in [0.5, 1)
    q = np.int64(np.rint(m * 256.0))                  # 8 significant bits, in [128, 256]
    return np.uint16(sign | (((e + 126) << 7) + q - 128))   # q == 256 carries into the exponent


@_inline
def lt_round_bf16(x):
    """A value computed in float32 (a bfloat16 op's), rounded to bfloat16, held in float32."""
    return lt_bf2f(lt_f2bf(np.float32(x)))


@_inline
def lt_round_bf16_d(x):
    """A float64 or integer value cast to bfloat16 (rounded once), held in float32."""
    return lt_bf2f(lt_d2bf(x))


@_inline
def lt_floordiv_i(a, b):
    if b == 0:
        return 0
    if b == -1:
        return -a                                     # wraps for the minimum, as NumPy does
    return a // b


@_inline
def lt_mod_i(a, b):
    if b == 0 or b == -1:
        return 0
    return a % b


@_inline
def lt_div_u(a, b):
    # `a - a`, not 0: numba unifies an int64 literal with uint64 to float64, losing the low bits.
    return a - a if b == 0 else a // b


@_inline
def lt_mod_u(a, b):
    return a - a if b == 0 else a % b


@_inline
def lt_divmod_f(a, b):
    """NumPy's npy_divmod: Python's floor division and remainder for floats."""
    mod = np.fmod(a, b)
    if b == 0:
        return a / b, mod
    div = (a - mod) / b
    if mod != 0:
        if (b < 0) != (mod < 0):
            mod += b
            div -= 1
    else:
        mod = np.copysign(mod - mod, b)
    if div != 0:
        floordiv = np.floor(div)
        if div - floordiv > 0.5:
            floordiv += 1
    else:
        floordiv = np.copysign(div - div, a / b)
    return floordiv, mod


@_inline
def lt_floordiv_f(a, b):
    return lt_divmod_f(a, b)[0]


@_inline
def lt_mod_f(a, b):
    return lt_divmod_f(a, b)[1]


@_inline
def lt_pow_i(a, b):
    """Integer power with wrapping, by squaring. NumPy raises for negative exponents; an elementwise
    kernel cannot, so those give the truncated result: 1 for base 1, +-1 for base -1, else 0."""
    base = np.int64(a)
    e = np.int64(b)
    if e < 0:
        if base == 1:
            return np.int64(1)
        if base == -1:
            return np.int64(-1) if e & 1 else np.int64(1)
        return np.int64(0)
    r = np.int64(1)
    while e:
        if e & 1:
            r = r * base
        base = base * base
        e >>= 1
    return r


@_inline
def lt_pow_u(a, b):
    base = np.uint64(a)
    e = np.uint64(b)
    r = np.uint64(1)
    while e:
        if e & np.uint64(1):
            r = r * base
        base = base * base
        e >>= np.uint64(1)
    return r


@_inline
def lt_pow_f(a, b):
    return a ** b


@_inline
def lt_sigmoid(x):
    return 1 / (1 + np.exp(-x))


@_inline
def lt_fmod_i(a, b):
    """C's remainder (the dividend's sign); x fmod 0 and x fmod -1 are 0, as NumPy gives."""
    if b == 0 or b == -1:
        return a - a
    r = a % b                                         # numba's % floors, as Python's
    if r != 0 and (r < 0) != (a < 0):
        r -= b
    return r


@_inline
def lt_logaddexp(x, y):
    """NumPy's npy_logaddexp (see the CUDA twin in kernels/cuda/prelude.py)."""
    if x == y:
        return x + 0.6931471805599453
    d = x - y
    if d > 0:
        return x + np.log1p(np.exp(-d))
    if d <= 0:
        return y + np.log1p(np.exp(d))
    return d


@_inline
def lt_logaddexp2(x, y):
    if x == y:
        return x + 1.0
    d = x - y
    if d > 0:
        return x + 1.4426950408889634 * np.log1p(np.exp2(-d))
    if d <= 0:
        return y + 1.4426950408889634 * np.log1p(np.exp2(d))
    return d


@_inline
def lt_nextafter(x, y, bits, equal_gives_y=False):
    """np.nextafter of a loop dtype `bits` wide: float16 values (held in float32) step to the
    neighbouring half as npy_half_nextafter does; equal operands give x (NumPy up to 2.4) or, with
    equal_gives_y, y (NumPy 2.5, as C's: kernels.ops.HALF_NEXTAFTER_EQUAL_GIVES_Y)."""
    if bits != 16:
        return np.nextafter(x, y)
    if x != x or y != y:
        return x + y
    if x == y:
        return y if equal_gives_y else x
    if x == 0:
        return np.float32(math.copysign(5.960464477539063e-08, y))
    h = np.int64(lt_f2h(x))
    h = h + 1 if (y > x) == (x > 0) else h - 1
    return lt_h2f(h)


@_inline
def lt_nextafter_bf16(x, y):
    """np.nextafter of bfloat16 values (held in float32), as ml_dtypes': the neighbouring bfloat16
    towards y; equal operands give y."""
    if x != x or y != y:
        return x + y
    if x == y:
        return y
    if x == 0:
        return np.float32(math.copysign(9.183549615799121e-41, y))      # 2**-133, the smallest subnormal
    b = np.int64(lt_f2bf(x))
    b = b + 1 if (y > x) == (x > 0) else b - 1
    return lt_bf2f(b)


@_inline
def lt_bf16_to_int(x, lo, end):
    """A bfloat16 value (held in float32) cast to an integer type of the range [lo, end), as ml_dtypes
    casts: truncated, and 0 for NaN and for values out of the type's range."""
    t = np.trunc(np.float64(x))
    return t if lo <= t < end else 0.0


@_inline
def lt_float_to_uint64(x):
    """A float cast to uint64 as NumPy's C cast on x86: a negative value through int64 (wrapping)."""
    return np.uint64(np.int64(x)) if x < 0 else np.uint64(x)
from lazytensor.kernels.cpu.numba_complex import (lt_cabs, lt_cdiv64, lt_cdiv128, lt_cpow, lt_crecip64, lt_crecip128,  # noqa: E402,F401
                                                   lt_csign64, lt_csign128, lt_cexp, lt_csinh, lt_ccosh,
                                                   lt_ctanh, lt_csin, lt_ccos, lt_ctan, lt_carccosh, lt_cexpm1_64, lt_cexpm1_128,
                                                   lt_cexp2_64, lt_cexp2_128, lt_clog1p64, lt_clog1p128, lt_clog, lt_clog2, lt_clog10)
