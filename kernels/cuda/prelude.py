"""CUDA C helpers that the C snippets of kernels/ops.py call, with NumPy's exact semantics where
plain C differs: integer division and remainder by zero give 0, floor division and remainder round
toward minus infinity (npy_divmod for floats), integer power wraps. The numba twin is
kernels/cpu/numba_prelude.py; both must agree element for element.

Signed overflow is undefined behaviour in C, so every computation that can wrap runs in the unsigned
twin of its type and is converted back (a modular conversion, never UB).

Integer values of 8 and 16 bits are held in int / unsigned int registers by the generated code
(see kernels/cuda/render_cuda.py), so the templates are instantiated for 32 and 64 bits in practice; the
traits cover every width all the same.
"""
from lazytensor.kernels.cuda.complex_prelude import COMPLEX
from lazytensor.kernels.ops import HALF_NEXTAFTER_EQUAL_GIVES_Y


# FLOOR_DIVIDE_OUT_OF_LINE: inlined, lt_floordiv_f and lt_mod_f were most of NVRTC's work for a
# kernel using them: bench_cuda's first-use kernel (one float32 // and %, each in 4 vector
# lanes and the tail) took 22.5 ms of NVRTC on the H200 host, 14.6 ms with them out of line. Results
# are bitwise the same (checked on 2^26 random-bit and linspace inputs, float32 and float64); that
# kernel runs as fast, x % 3 - x // 2 alone 9% slower in float32 and unchanged in float64.
INTEGER_AND_FLOAT = r"""
template <typename T> struct lt_unsigned_of;
template <> struct lt_unsigned_of<signed char> { typedef unsigned char type; };
template <> struct lt_unsigned_of<short> { typedef unsigned short type; };
template <> struct lt_unsigned_of<int> { typedef unsigned int type; };
template <> struct lt_unsigned_of<long long> { typedef unsigned long long type; };
template <> struct lt_unsigned_of<unsigned char> { typedef unsigned char type; };
template <> struct lt_unsigned_of<unsigned short> { typedef unsigned short type; };
template <> struct lt_unsigned_of<unsigned int> { typedef unsigned int type; };
template <> struct lt_unsigned_of<unsigned long long> { typedef unsigned long long type; };

/* x // 0 == 0 and MIN // -1 == MIN (it wraps), as NumPy gives. */
template <typename T>
__device__ __forceinline__ T lt_floordiv_i(T a, T b) {
    typedef typename lt_unsigned_of<T>::type U;
    if (b == 0) return (T)0;
    if (b == (T)-1) return (T)((U)0 - (U)a);
    T q = (T)(a / b);                       /* |b| >= 2: no overflow, and q - 1 cannot underflow */
    if ((T)(a % b) != 0 && ((a < 0) != (b < 0))) q = (T)(q - 1);
    return q;
}

/* The remainder takes the divisor's sign; x % 0 == 0 and x % -1 == 0. */
template <typename T>
__device__ __forceinline__ T lt_mod_i(T a, T b) {
    if (b == 0 || b == (T)-1) return (T)0;
    T r = (T)(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = (T)(r + b);   /* opposite signs, |r| < |b|: no overflow */
    return r;
}

template <typename T>
__device__ __forceinline__ T lt_div_u(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); }

template <typename T>
__device__ __forceinline__ T lt_mod_u(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }

/* Power by squaring in 64-bit unsigned arithmetic (wrapping), truncated to T. NumPy raises for
   negative exponents; a kernel cannot, so they give the truncated value: 1 for base 1, +-1 for
   base -1, else 0 (the numba prelude does the same). */
template <typename T>
__device__ __forceinline__ T lt_pow_i(T a, T b) {
    if (b < 0) {
        if (a == 1) return (T)1;
        if (a == (T)-1) return (b & 1) ? (T)-1 : (T)1;
        return (T)0;
    }
    unsigned long long base = (unsigned long long)(long long)a;
    unsigned long long e = (unsigned long long)(long long)b;
    unsigned long long r = 1ULL;
    while (e) {
        if (e & 1ULL) r *= base;
        base *= base;
        e >>= 1;
    }
    return (T)(long long)r;
}

template <typename T>
__device__ __forceinline__ T lt_pow_u(T a, T b) {
    unsigned long long base = (unsigned long long)a;
    unsigned long long e = (unsigned long long)b;
    unsigned long long r = 1ULL;
    while (e) {
        if (e & 1ULL) r *= base;
        base *= base;
        e >>= 1;
    }
    return (T)r;
}

/* NumPy's npy_divmod: Python's floor division and remainder for floats, including the signs of
   zero results and the snapping of the quotient to the nearest integer. */
template <typename T>
__device__ __forceinline__ T lt_divmod_f(T a, T b, T& mod) {
    mod = fmod(a, b);
    if (b == (T)0) return a / b;
    T div = (a - mod) / b;
    if (mod != (T)0) {
        if ((b < (T)0) != (mod < (T)0)) {
            mod += b;
            div -= (T)1;
        }
    } else {
        mod = copysign((T)0, b);
    }
    T floordiv;
    if (div != (T)0) {
        floordiv = floor(div);
        if (div - floordiv > (T)0.5) floordiv += (T)1;
    } else {
        floordiv = copysign((T)0, a / b);
    }
    return floordiv;
}

/* Out of line (__noinline__): fmod's loop and the exact divisions are long, and a kernel copies its
   element code into every lane of the unrolled vector loop and into the scalar tail; one body per
   kernel and a call per element instead (see FLOOR_DIVIDE_OUT_OF_LINE in cuda_prelude.py). */
template <typename T>
__device__ __noinline__ T lt_floordiv_f(T a, T b) { T mod; return lt_divmod_f(a, b, mod); }

template <typename T>
__device__ __noinline__ T lt_mod_f(T a, T b) { T mod; lt_divmod_f(a, b, mod); return mod; }

/* fmod: the remainder with the dividend's sign, as C's %; x fmod 0 and x fmod -1 are 0 (NumPy's). */
template <typename T>
__device__ __forceinline__ T lt_fmod_i(T a, T b) {
    if (b == 0 || b == (T)-1) return (T)0;
    return (T)(a % b);
}

/* NumPy's npy_logaddexp and npy_logaddexp2: equal arguments (infinities of one sign included)
   first, then the larger plus log1p of the smaller's share; NaN from the difference. */
template <typename T>
__device__ __forceinline__ T lt_logaddexp(T x, T y) {
    if (x == y) return x + (T)0.693147180559945309417232121458176568;
    const T d = x - y;
    if (d > (T)0) return x + log1p(exp(-d));
    if (d <= (T)0) return y + log1p(exp(d));
    return d;
}

template <typename T>
__device__ __forceinline__ T lt_logaddexp2(T x, T y) {
    if (x == y) return x + (T)1;
    const T d = x - y;
    if (d > (T)0) return x + (T)1.442695040888963407359924681001892137 * log1p(exp2(-d));
    if (d <= (T)0) return y + (T)1.442695040888963407359924681001892137 * log1p(exp2(d));
    return d;
}

/* nextafter of the loop dtype's width: C's for float32 and float64; float16 has a specialization
   in the float16 part of the prelude (a float register holds the half, the step is of the half). */
template <int N, typename T>
__device__ __forceinline__ T lt_nextafter(T x, T y) { return nextafter(x, y); }

/* Float to integer casts. Out-of-range values are undefined in NumPy (it warns); in range, C's
   truncation is NumPy's. Narrow targets go through int and unsigned targets through long long, so
   e.g. -1.0 -> uint8 gives 255 as NumPy does on x86, where the GPU's own conversion would saturate. */
template <typename T, typename F>
__device__ __forceinline__ T lt_float_to_int(F x) {
    if (sizeof(T) < 4) return (T)(int)x;
    if ((T)-1 > (T)0) {                                    /* unsigned target */
        if (sizeof(T) == 4) return (T)(long long)x;
        return x < (F)0 ? (T)(long long)x : (T)x;
    }
    return (T)x;
}

/* Copy BYTES bytes between 16-byte aligned locations with the widest loads and stores. */
template <int W> struct lt_chunk;
template <> struct lt_chunk<16> { typedef uint4 type; };
template <> struct lt_chunk<8> { typedef uint2 type; };
template <> struct lt_chunk<4> { typedef unsigned int type; };
template <> struct lt_chunk<2> { typedef unsigned short type; };
template <> struct lt_chunk<1> { typedef unsigned char type; };

template <int BYTES, typename T>
__device__ __forceinline__ void lt_copy_vector(T* dst, const T* src) {
    typedef typename lt_chunk<(BYTES < 16 ? BYTES : 16)>::type C;
    #pragma unroll
    for (int c = 0; c < BYTES / (int)sizeof(C); ++c)
        reinterpret_cast<C*>(dst)[c] = reinterpret_cast<const C*>(src)[c];
}
"""

# Only kernels that touch float16 pay for including cuda_fp16.h.
FLOAT16 = r"""
#include <cuda_fp16.h>

/* Round to the nearest float16, held in a float register. A double rounds once, straight to half,
   as NumPy's double -> half cast does; other types go through float, exact for every value that
   does not overflow half anyway. */
__device__ __forceinline__ float lt_round_f16(double x) { return __half2float(__double2half(x)); }
template <typename T>
__device__ __forceinline__ float lt_round_f16(T x) { return __half2float(__float2half_rn((float)x)); }
"""


# NumPy's float16 nextafter: equal operands give x up to NumPy 2.4 (npy_half_nextafter), y from 2.5
# on, as C's (they differ for nextafter(0.0, -0.0): ops.HALF_NEXTAFTER_EQUAL_GIVES_Y, the installed
# NumPy's), zero steps to the smallest subnormal toward y, else one step of the bits.
FLOAT16_NEXTAFTER = r"""
template <>
__device__ __forceinline__ float lt_nextafter<16, float>(float x, float y) {
    if (x != x || y != y) return x + y;
    if (x == y) return {equal};
    if (x == 0.0f) return copysignf(5.9604644775390625e-08f, y);
    unsigned short h = __half_as_ushort(__float2half_rn(x));
    h = ((y > x) == (x > 0.0f)) ? (unsigned short)(h + 1) : (unsigned short)(h - 1);
    return __half2float(__ushort_as_half(h));
}
""".replace("{equal}", "y" if HALF_NEXTAFTER_EQUAL_GIVES_Y else "x")


# Only kernels that touch bfloat16 include cuda_bf16.h. Values live in float registers, as float16's;
# a NaN is rounded on the bits so that the CUDA and numba kernels give the same bits as ml_dtypes (the
# quiet NaN of its sign; __float2bfloat16_rn gives one NaN for all), other values by the hardware's cvt.
BFLOAT16 = r"""
#include <cuda_bf16.h>

__device__ __forceinline__ unsigned short lt_f2bf_bits(float x) {
    // the hardware's round to nearest even (one cvt: these kernels are otherwise bound by the rounding)
    return x != x ? (unsigned short)(((__float_as_uint(x) >> 16) & 0x8000u) | 0x7FC0u)
                  : __bfloat16_as_ushort(__float2bfloat16_rn(x));
}
__device__ __forceinline__ __nv_bfloat16 lt_f2bf(float x) { return __ushort_as_bfloat16(lt_f2bf_bits(x)); }
__device__ __forceinline__ float lt_bf2f_bits(unsigned short b) { return __uint_as_float((unsigned int)b << 16); }
/* A value of a bfloat16 op (computed in float) rounded once to bfloat16, held in a float register. */
__device__ __forceinline__ float lt_round_bf16(float x) { return lt_bf2f_bits(lt_f2bf_bits(x)); }
/* A double or an integer cast to bfloat16: rounded once from double, as ml_dtypes casts. */
template <typename T>
__device__ __forceinline__ float lt_round_bf16_d(T x) {
    const double d = (double)x;
    if (d != d) return lt_round_bf16((float)d);
    return __bfloat162float(__double2bfloat16(d));
}
/* ml_dtypes' bfloat16 -> integer cast: truncated, and 0 for NaN and values out of the type's range. */
template <typename T>
__device__ __forceinline__ T lt_bf16_to_int(float x, double lo, double end) {
    const double t = trunc((double)x);
    return (t >= lo && t < end) ? (T)t : (T)0;
}
/* ml_dtypes' power (the host libm's powf): a signaling NaN operand gives NaN, pow(1, y) and
   pow(x, 0) too, where CUDA's powf gives 1. */
__device__ __forceinline__ bool lt_signaling_f(float x) {
    const unsigned int u = __float_as_uint(x) & 0x7FFFFFFFu;
    return u > 0x7F800000u && u < 0x7FC00000u;
}
__device__ __forceinline__ float lt_pow_bf16(float x, float y) {
    return (lt_signaling_f(x) || lt_signaling_f(y)) ? x + y : powf(x, y);
}
/* ml_dtypes' nextafter: the neighbouring bfloat16 toward y; equal operands give y. */
__device__ __forceinline__ float lt_nextafter_bf16(float x, float y) {
    if (x != x || y != y) return x + y;
    if (x == y) return y;
    if (x == 0.0f) return copysignf(9.183549615799121e-41f, y);
    unsigned short b = lt_f2bf_bits(x);
    b = ((y > x) == (x > 0.0f)) ? (unsigned short)(b + 1) : (unsigned short)(b - 1);
    return lt_bf2f_bits(b);
}
"""


def prelude(float16: bool, bfloat16: bool = False, complex_: bool = False) -> str:
    head = (FLOAT16 + INTEGER_AND_FLOAT + FLOAT16_NEXTAFTER) if float16 else INTEGER_AND_FLOAT
    head = BFLOAT16 + head if bfloat16 else head
    return head + COMPLEX if complex_ else head
