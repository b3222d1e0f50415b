"""float32 transcendental functions that LLVM vectorizes, as source text for generated numba kernels.

Design: docs/design/cpu-transcendentals.md, section "kernels/cpu/numba_vector_math.py".
"""
from __future__ import annotations

import re

# e^s for |s| <= ln2/2: a degree-6 polynomial (relative error 3e-9).
_EXP_REDUCED = '''
@njit(error_model="numpy", fastmath={"contract"})
def lt_exp_reduced_f32(s):
    return np.float32(1.0) + s + s * s * (np.float32(0.4999999344768689) + s * (np.float32(0.16666520634647408)
        + s * (np.float32(0.04166838803314525) + s * (np.float32(0.008368715856101324)
        + s * np.float32(0.0013814595793038703)))))
'''

# e^(-2h) for h in [0, 10] (tanh's), without float <-> int conversions: the fma h * (-2 log2 e) + M,
# M = 1.5 * 2^23 + 127, rounds to an integer (float32's spacing there is 1), so u - M = -k is exact and
# u's low mantissa bits hold 127 - k, which one shift puts into the exponent field of 2^-k. Then
# -2h = s - k ln2 with |s| <= ln2/2 (Cody-Waite: ln2 in two float32 parts, so k * LN2_HI is exact),
# reduced as w = s / 2 (the halved constants need no 2h), and e^s = 1 + s + s^2 (...) is
# lt_exp_reduced_f32's polynomial with each coefficient scaled by its power of 2 (exact). Horner's
# form: the gradient loop is bound by its count of vector operations more than by their chain
# (Estrin's form, one multiply more per polynomial, measured slower).
_EXP_NEG2 = '''
@njit(error_model="numpy", fastmath={"contract"})
def lt_exp_neg2_f32(h):
    u = h * np.float32(-2.8853900817779268) + np.float32(12583039.0)
    kf = u - np.float32(12583039.0)
    w = (kf * np.float32(-0.3465728759765625) - h) + kf * np.float32(-7.143033826650935e-07)
    p = np.float32(1.9999997379074756) + w * (np.float32(1.3333216507717926) + w * (np.float32(0.666694208530324)
        + w * (np.float32(0.2677989073952424) + w * np.float32(0.0884134130754477))))
    return (((w * np.float32(2.0) + np.float32(1.0)) + (w * w) * p)
            * np.int32(np.float32(u).view(np.int32) << 23).view(np.float32))
'''

# exp: x clamped to [-104, 88.8] (beyond, e^x rounds to 0 or overflows to inf all the same), reduced
# as above; 2^k in two factors 2^(k >> 1) 2^(k - (k >> 1)), each a normal float32 for k in
# [-150, 128], so subnormal results are rounded once, as libm's.
_EXP = '''
@njit(error_model="numpy", fastmath={"contract"})
def lt_exp_f32(x):
    x = np.float32(x)
    c = x if x < np.float32(88.8) else np.float32(88.8)
    c = c if c > np.float32(-104.0) else np.float32(-104.0)
    kf = np.floor(c * np.float32(1.4426950408889634) + np.float32(0.5))
    k = np.int32(kf)
    s = (c - kf * np.float32(0.693145751953125)) - kf * np.float32(1.428606765330187e-06)
    k1 = k >> 1
    r = (lt_exp_reduced_f32(s) * np.int32((k1 + 127) << 23).view(np.float32)
         * np.int32((k - k1 + 127) << 23).view(np.float32))
    return r if x == x else x
'''

# sigmoid as NumPy's reference computes it in float32: 1 / (1 + e^-x) (e^-x overflowing gives 0).
_SIGMOID = '''
@njit(error_model="numpy", fastmath={"contract"})
def lt_sigmoid_f32(x):
    x = np.float32(x)
    return np.float32(1.0) / (np.float32(1.0) + lt_exp_f32(-x))
'''

# tanh: |x| < 0.55: x + x z Q(z), z = x^2, Q a degree-4 fit of the relative error (1e-9); otherwise
# 1 - 2t / (1 + t), t = e^(-2|x|) with |x| clamped to 10 (tanh rounds to 1 from 9.01 on), not
# (1 - t) / (1 + t), one operation fewer but 2 ulps off at 8 float32 values (exhaustive scan).
# Both are >= 0, so OR-ing in x's sign bit copies the sign (tanh(-0.0) is -0.0; one operation
# fewer than math.copysign's); a NaN is returned as it came (signalling ones too: arithmetic would
# quiet them).
_TANH = '''
@njit(error_model="numpy", fastmath={"contract"})
def lt_tanh_f32(x):
    x = np.float32(x)
    ax = abs(x)
    z = ax * ax
    q = np.float32(-0.33333317552014985) + z * (np.float32(0.13332585901384897) + z * (np.float32(-0.05385228622767045)
        + z * (np.float32(0.02107158424175732) + z * np.float32(-0.006274107549612637))))
    small = ax + (ax * z) * q
    t = lt_exp_neg2_f32(ax if ax < np.float32(10.0) else np.float32(10.0))
    big = np.float32(1.0) - (t + t) / (np.float32(1.0) + t)
    r = small if ax < np.float32(0.55) else big
    r = np.int32(np.float32(r).view(np.int32) | (np.float32(x).view(np.int32) & np.int32(-2147483648))).view(np.float32)
    return r if x == x else x
'''

# log (Cephes' logf): x = m 2^e with m in [sqrt(1/2), sqrt(2)) read from the bits (a subnormal x
# scaled by 2^23 first), log(m) = f - f^2/2 + f^3 P(f) with f = m - 1, plus e ln2 in two parts.
# numba's scalar .view wants its operand straight from an np.<type>() call, hence np.float32(xs).
_LOG = '''
@njit(error_model="numpy", fastmath={"contract"})
def lt_log_f32(x):
    x = np.float32(x)
    sub = x < np.float32(1.1754943508222875e-38)
    xs = x * np.float32(8388608.0) if sub else x
    bits = np.float32(xs).view(np.int32)
    e = ((bits >> 23) & 0xFF) - (150 if sub else 127)
    m = np.int32((bits & 0x7FFFFF) | 0x3F800000).view(np.float32)
    low = m < np.float32(1.4142135623730951)
    f = (m if low else m * np.float32(0.5)) - np.float32(1.0)
    fe = np.float32(e if low else e + 1)
    z = f * f
    y = (((((((((np.float32(7.0376836292e-2) * f - np.float32(1.1514610310e-1)) * f + np.float32(1.1676998740e-1)) * f
        - np.float32(1.2420140846e-1)) * f + np.float32(1.4249322787e-1)) * f - np.float32(1.6668057665e-1)) * f
        + np.float32(2.0000714765e-1)) * f - np.float32(2.4999993993e-1)) * f + np.float32(3.3333331174e-1)) * f * z)
    y2 = y + fe * np.float32(-2.12194440e-4) - np.float32(0.5) * z
    r = (f + y2) + fe * np.float32(0.693359375)
    edge = np.float32(-np.inf) if x == np.float32(0.0) else np.float32(np.nan)
    finite = r if x > np.float32(0.0) else edge
    return finite if x < np.float32(np.inf) else x
'''

# sin(|x| + q pi/2) in float64 for a finite float32 x, q = 0 (sin) or 1 (cos). |x| < pi/4 is its own
# reduced argument; above, |x| = mm 2^(s+1) with mm the 24-bit mantissa shifted left by 0-7 bits and s
# a multiple of 8 (from the exponent), and |x| 2/pi mod 4 = mm w 2^-94 mod 4, where w is the 96-bit
# window of 2/pi's bits s .. s+95 (_LT_TWO_OVER_PI_WINDOWS, three 32-bit words for each s from -32 to
# 96): the bits above the window contribute multiples of 4, those below it less than 2^-63. Its bits
# 2^1 .. 2^-62, (mm w >> 32) mod 2^64, are three 64-bit products (exact for every float32, no
# branch: the table read is a gather), the quadrant n their top 2 bits rounded, the rest r's
# fraction of a quarter turn (error below 2^-61 quarter turns; r is never smaller than 2^-30 or so
# for a float32 x). sin and cos of r in [-pi/4, pi/4] by polynomials in r^2 (least squares, relative
# error 5e-12 and 6e-14), both computed and one selected by n.
_SIN_QUADRANT = """
_LT_TWO_OVER_PI_WINDOWS = np.array([
    0, 1367130551, 656542356,
    81, 2093070119, 571118846,
    20860, 3250005794, 177536531,
    5340353, 3072795146, 2499679147,
    1367130551, 656542356, 4262702056,
    2093070119, 571118846, 330033402,
    3250005794, 177536531, 2884172442,
    3072795146, 2499679147, 3908737646,
    656542356, 4262702056, 4204424928,
    571118846, 330033402, 2590957677,
    177536531, 2884172442, 1860201905,
    2499679147, 3908737646, 3765285194,
    4262702056, 4204424928, 1840335564,
    330033402, 2590957677, 2974469278,
    2884172442, 1860201905, 1254923809,
    3908737646, 3765285194, 3432915400,
    4204424928, 1840335564, 2653014048], np.uint32)

@njit(error_model="numpy", fastmath={"contract"})
def lt_sin_quadrant_f32(x, q):
    ax = abs(np.float32(x))
    bits = np.float32(ax).view(np.int32)
    e = (bits >> 23) - 151
    k = min(max((e >> 3) + 4, 0), 16) * 3
    mm = np.uint64((bits & 0x7FFFFF) | 0x800000) << np.uint64(e & 7)
    w2 = np.uint64(_LT_TWO_OVER_PI_WINDOWS[k])
    w1 = np.uint64(_LT_TWO_OVER_PI_WINDOWS[k + 1])
    w0 = np.uint64(_LT_TWO_OVER_PI_WINDOWS[k + 2])
    res = ((mm * w2) << np.uint64(32)) + mm * w1 + ((mm * w0) >> np.uint64(32))
    n = (res + np.uint64(2305843009213693952)) >> np.uint64(62)
    f = np.int64(res - (n << np.uint64(62)))
    small = ax < np.float32(0.7853981633974483)
    r = np.float64(ax) if small else np.float64(f) * 3.4061215800865545e-19
    n = (np.int64(0) if small else np.int64(n)) + q
    z = r * r
    s = r + (r * z) * (-0.1666666664095424 + z * (0.008333329329249427 + z * (-0.00019839320447047597
        + z * 2.718197757554512e-06)))
    c = 1.0 + z * (-0.49999999999531497 + z * (0.041666666560300325 + z * (-0.0013888881001326658
        + z * (2.4799027273451063e-05 + z * -2.7179238475922273e-07))))
    v = c if n & 1 else s
    return -v if n & 2 else v
"""

# sin: the sign of x put back by its sign bit (sin(-0.0) is -0.0); cos: even. inf gives NaN, a NaN
# is returned as it came.
_SIN = """
@njit(error_model="numpy", inline="always")
def lt_sin_f32(x):
    x = np.float32(x)
    v = np.float32(lt_sin_quadrant_f32(x, 0))
    r = np.int32(np.float32(v).view(np.int32) ^ (np.float32(x).view(np.int32) & np.int32(-2147483648))).view(np.float32)
    return r if abs(x) < np.float32(np.inf) else (x if x != x else np.float32(np.nan))
"""

_COS = """
@njit(error_model="numpy", inline="always")
def lt_cos_f32(x):
    x = np.float32(x)
    r = np.float32(lt_sin_quadrant_f32(x, 1))
    return r if abs(x) < np.float32(np.inf) else (x if x != x else np.float32(np.nan))
"""

# name -> (source, helpers it calls)
HELPERS = {
    "lt_exp_reduced_f32": (_EXP_REDUCED, ()),
    "lt_exp_neg2_f32": (_EXP_NEG2, ()),
    "lt_exp_f32": (_EXP, ("lt_exp_reduced_f32",)),
    "lt_sigmoid_f32": (_SIGMOID, ("lt_exp_f32",)),
    "lt_tanh_f32": (_TANH, ("lt_exp_neg2_f32",)),
    "lt_log_f32": (_LOG, ()),
    "lt_sin_quadrant_f32": (_SIN_QUADRANT, ()),
    "lt_sin_f32": (_SIN, ("lt_sin_quadrant_f32",)),
    "lt_cos_f32": (_COS, ("lt_sin_quadrant_f32",)),
}

_CALL = re.compile(r"\b(lt_\w+_f32)\(")


def definitions_for(source: str) -> list[str]:
    """The definitions of the helpers `source` calls, each after the helpers it calls."""
    wanted = []

    def add(name):
        if name in wanted:
            return
        for dep in HELPERS[name][1]:
            add(dep)
        wanted.append(name)

    for name in sorted(set(_CALL.findall(source))):
        if name in HELPERS:
            add(name)
    return [HELPERS[name][0] for name in wanted]
