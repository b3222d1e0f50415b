"""float32 sin and cos that LLVM vectorizes, as source text for generated numba kernels: float64
arithmetic on float32 arguments (FreeBSD's sinf/cosf design), branch free.

Design: docs/design/cpu-transcendentals.md, section "sin and cos".
"""
from __future__ import annotations


def _two_over_pi_bits(bits: int) -> int:
    """floor(2/pi * 2^bits), from Machin's formula in integers (guard bits dropped at the end)."""
    guard = bits + 64
    one = 1 << guard

    def arctan_inv(n):                  # arctan(1/n) * 2^guard
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total
    pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))
    return ((2 * one * one) // pi) >> 64


# Arguments of at least 2^28 pi/2 (float32 integers m 2^E, E >= 5): x 2/pi mod 4 = m (2^E 2/pi mod 4)
# mod 4, the second factor from the table of E in four parts, the first three of 28 bits (at weights
# 2^1..2^-26, 2^-27..2^-54, 2^-55..2^-82), so that m times each is exact, the fourth the next 53.
_E_MIN, _E_MAX = 5, 104       # (the row of E is E - 5, clamped: the rows of smaller E are never selected)


def _words_source() -> str:
    """The first 320 bits of 2/pi after the point, as five uint64 words."""
    bits = _two_over_pi_bits(320)
    words = [(bits >> (64 * (4 - i))) & ((1 << 64) - 1) for i in range(5)]
    return "\n".join(f"_W{i} = np.uint64({w})" for i, w in enumerate(words))


# |x| reduced to r = |x| - q pi/2, |r| <= pi/4, q in 0..3 (as a float), written into sin's and cos's
# bodies (a helper returning the pair kept LLVM from vectorizing the loop): below 2^28 pi/2,
# fn = rint(x 2/pi) and pi/2 in 33 + 53 bits (FreeBSD's __rem_pio2f: "25+53 bit pi is good enough
# for medium size" float arguments); above, the table's products, summed with a two-sum and rounded
# once to double. Both are computed for every element (selects, no branch).
_REDUCE = """
    a = np.float64(ax)
    fn = np.floor(a * 0.6366197723675814 + 0.5)
    r_mid = (a - fn * 1.5707963109016418) - fn * 1.5893254773528196e-08
    bits = np.float32(ax).view(np.int32)
    e = ((bits >> 23) & 0xFF) - 152
    e = e if e > 3 else 3
    e = e if e < 102 else 102
    p = np.uint64(e)
    sh = p & np.uint64(63)
    lo = p < np.uint64(64)
    w0 = _W0 if lo else _W1
    w1 = _W1 if lo else _W2
    w2 = _W2 if lo else _W3
    w3 = _W3 if lo else _W4
    g0 = (w0 << sh) | ((w1 >> np.uint64(1)) >> (np.uint64(63) - sh))
    g1 = (w1 << sh) | ((w2 >> np.uint64(1)) >> (np.uint64(63) - sh))
    g2 = (w2 << sh) | ((w3 >> np.uint64(1)) >> (np.uint64(63) - sh))
    c0 = np.float64(g0 >> np.uint64(36)) * 1.4901161193847656e-08
    c1 = np.float64((g0 >> np.uint64(8)) & np.uint64(268435455)) * 5.551115123125783e-17
    c2 = np.float64(((g0 & np.uint64(255)) << np.uint64(20)) | (g1 >> np.uint64(44))) * 2.0679515313825692e-25
    c3 = np.float64(((g1 & np.uint64(17592186044415)) << np.uint64(9)) | (g2 >> np.uint64(55))) * 2.2958874039497803e-41
    m = np.float64((bits & 0x7FFFFF) | 0x800000)
    y1 = m * c0
    y1 = y1 - 4.0 * np.floor(y1 * 0.25)
    k1 = np.floor(y1 + 0.5)
    f1 = y1 - k1
    y2 = m * c1
    s = f1 + y2
    bb = s - f1
    err = (f1 - (s - bb)) + (y2 - bb)
    k2 = np.floor(s + 0.5)
    s = s - k2
    t = s + (err + (m * c2 + m * c3))
    big = a >= 421657428.0
    r = t * 1.5707963267948966 if big else r_mid
    q = k1 + k2 if big else fn
    q = q - 4.0 * np.floor(q * 0.25)
    z = r * r
    w = z * z
    sr = (r + (z * r) * (-0.16666666641626524 + z * 0.008333329385889463)) + (z * r) * w * (
        -0.00019839334836096632 + z * 2.718311493989822e-06)
    cr = ((1.0 + z * -0.499999997251031) + w * 0.04166662332373906) + (w * z) * (
        -0.001388676377460993 + z * 2.439044879627741e-05)
    odd = q == 1.0 or q == 3.0
"""

# sin and cos of r: FreeBSD's __kernel_sindf and __kernel_cosdf (errors below 2^-37 and 2^-33
# relative, far under float32's half ulp). sin(x) = sign(x) sin(|x|), by quadrant sin r, cos r,
# -sin r, -cos r; |x| < 2^-12 returns x (its sign too: sin(-0.0) is -0.0), inf gives NaN and a NaN
# comes back as it came. cos(x) = cos(|x|): cos r, -sin r, -cos r, sin r.
_SIN = _words_source() + """

@njit(error_model="numpy", fastmath={"contract"}, inline="always")
def lt_sin_f32(x):
    x = np.float32(x)
    ax = abs(x)""" + _REDUCE + """    v = cr if odd else sr
    v = -v if (q >= 2.0) != (x < np.float32(0.0)) else v
    v = np.float64(x) if ax < np.float32(0.000244140625) else v
    v = v if ax < np.float32(np.inf) else np.float64(np.nan)
    return np.float32(v) if x == x else x
"""

_COS = _words_source() + """

@njit(error_model="numpy", fastmath={"contract"}, inline="always")
def lt_cos_f32(x):
    x = np.float32(x)
    ax = abs(x)""" + _REDUCE + """    v = sr if odd else cr
    v = -v if q == 1.0 or q == 2.0 else v
    v = v if ax < np.float32(np.inf) else np.float64(np.nan)
    return np.float32(v) if x == x else x
"""

HELPERS = {"lt_sin_f32": (_SIN, ()), "lt_cos_f32": (_COS, ())}
