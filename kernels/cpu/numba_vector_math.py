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

# name -> (source, helpers it calls)
HELPERS = {
    "lt_exp_reduced_f32": (_EXP_REDUCED, ()),
    "lt_exp_neg2_f32": (_EXP_NEG2, ()),
    "lt_exp_f32": (_EXP, ("lt_exp_reduced_f32",)),
    "lt_sigmoid_f32": (_SIGMOID, ("lt_exp_f32",)),
    "lt_tanh_f32": (_TANH, ("lt_exp_neg2_f32",)),
    "lt_log_f32": (_LOG, ()),
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
