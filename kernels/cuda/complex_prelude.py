"""CUDA C for complex64 and complex128: lt_complex<T> (lt_c64, lt_c128), two parts in memory as NumPy
lays them out, with the operators the generic snippets of kernels/ops.py use (+, -, *, ==, !=, unary -,
comparison with 0) and the functions of the complex snippets, written after NumPy's loops: Smith's
division, the naive product (NVRTC runs with --fmad=false, so it rounds as the numba kernels do),
integer powers by repeated multiplication, sign and abs as NumPy 2 defines them. The transcendental
functions use the textbook formulas with the cancellation-prone regions rewritten (log1p near 0, odd
functions by symmetry); special values of infinite parts follow C99 Annex G only where the formula
does. The numba twins are kernels/cpu/numba_complex.py and numba's own complex functions.
"""

COMPLEX = r"""
template <typename T> struct __align__(2 * sizeof(T)) lt_complex {
    T re, im;
    __device__ __forceinline__ lt_complex() : re(0), im(0) {}
    __device__ __forceinline__ lt_complex(T r) : re(r), im(0) {}
    __device__ __forceinline__ lt_complex(T r, T i) : re(r), im(i) {}
    template <typename S> __device__ __forceinline__ explicit lt_complex(const lt_complex<S>& z)
        : re((T)z.re), im((T)z.im) {}
    friend __device__ __forceinline__ lt_complex operator+(lt_complex a, lt_complex b) { return lt_complex(a.re + b.re, a.im + b.im); }
    friend __device__ __forceinline__ lt_complex operator-(lt_complex a, lt_complex b) { return lt_complex(a.re - b.re, a.im - b.im); }
    friend __device__ __forceinline__ lt_complex operator-(lt_complex a) { return lt_complex(-a.re, -a.im); }
    friend __device__ __forceinline__ lt_complex operator*(lt_complex a, lt_complex b) {
        return lt_complex(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
    }
    friend __device__ __forceinline__ bool operator==(lt_complex a, lt_complex b) { return a.re == b.re && a.im == b.im; }
    friend __device__ __forceinline__ bool operator!=(lt_complex a, lt_complex b) { return a.re != b.re || a.im != b.im; }
};
typedef lt_complex<float> lt_c64;
typedef lt_complex<double> lt_c128;
#define LT_NAN ((T)__int_as_float(0x7fc00000))
#define LT_INF ((T)__int_as_float(0x7f800000))

/* Conversions from real values (any arithmetic type) and between the two widths. */
template <typename C, typename S> __device__ __forceinline__ C lt_to_complex(S x) { return C((decltype(C().re))x); }
template <typename C, typename S> __device__ __forceinline__ C lt_to_complex(lt_complex<S> z) { return C(z); }

template <typename T> __device__ __forceinline__ lt_complex<T> lt_conj(lt_complex<T> z) { return lt_complex<T>(z.re, -z.im); }
template <typename T> __device__ __forceinline__ T lt_cabs(lt_complex<T> z) { return hypot(z.re, z.im); }
template <typename T> __device__ __forceinline__ lt_complex<T> lt_crint(lt_complex<T> z) { return lt_complex<T>(rint(z.re), rint(z.im)); }

/* NumPy's division (Smith's algorithm; a zero divisor gives inf or NaN parts). */
template <typename T> __device__ lt_complex<T> lt_cdiv(lt_complex<T> a, lt_complex<T> b) {
    T br = fabs(b.re), bi = fabs(b.im);
    if (br >= bi) {
        if (br == 0 && bi == 0) return lt_complex<T>(a.re / br, a.im / br);
        T rat = b.im / b.re, scl = (T)1 / (b.re + b.im * rat);
        return lt_complex<T>((a.re + a.im * rat) * scl, (a.im - a.re * rat) * scl);
    }
    T rat = b.re / b.im, scl = (T)1 / (b.im + b.re * rat);
    return lt_complex<T>((a.re * rat + a.im) * scl, (a.im * rat - a.re) * scl);
}

/* NumPy's reciprocal loop (1 / 0 is NaN there, unlike its division). */
template <typename T> __device__ lt_complex<T> lt_crecip(lt_complex<T> z) {
    if (fabs(z.im) <= fabs(z.re)) {
        T q = z.im / z.re, d = z.re + z.im * q;
        return lt_complex<T>((T)1 / d, -q / d);
    }
    T q = z.re / z.im, d = z.re * q + z.im;
    return lt_complex<T>(q / d, (T)-1 / d);
}

template <typename T> __device__ lt_complex<T> lt_csign(lt_complex<T> z) {
    T m = hypot(z.re, z.im);
    if (isnan(m) || (isinf(z.re) && isinf(z.im))) return lt_complex<T>(LT_NAN, LT_NAN);
    if (isinf(z.re)) return lt_complex<T>(z.re > 0 ? 1 : -1, 0);
    if (isinf(z.im)) return lt_complex<T>(0, z.im > 0 ? 1 : -1);
    if (m == 0) return lt_complex<T>(0, 0);
    return lt_complex<T>(z.re / m, z.im / m);
}

template <typename T> __device__ lt_complex<T> lt_cexp(lt_complex<T> z) {
    if (z.im == 0) return lt_complex<T>(exp(z.re), z.im);
    T e = exp(z.re);
    return lt_complex<T>(e * cos(z.im), e * sin(z.im));
}
template <typename T> __device__ lt_complex<T> lt_clog(lt_complex<T> z) {
    return lt_complex<T>(log(hypot(z.re, z.im)), atan2(z.im, z.re));
}
template <typename T> __device__ lt_complex<T> lt_csqrt(lt_complex<T> z) {
    if (z.re == 0 && z.im == 0) return lt_complex<T>(0, z.im);
    if (isinf(z.im)) return lt_complex<T>(LT_INF, z.im);
    if (isnan(z.re)) return lt_complex<T>(z.re, (z.im - z.im) / (z.im - z.im));
    if (isinf(z.re)) {
        if (z.re > 0) return lt_complex<T>(z.re, isnan(z.im) ? z.im : copysign((T)0, z.im));
        return lt_complex<T>(isnan(z.im) ? fabs(z.im - z.im) : (T)0, copysign(fabs(z.re), z.im));
    }
    T t = sqrt((fabs(z.re) + hypot(z.re, z.im)) * (T)0.5);
    if (z.re >= 0) return lt_complex<T>(t, z.im / (2 * t));
    return lt_complex<T>(fabs(z.im) / (2 * t), copysign(t, z.im));
}
template <typename T> __device__ lt_complex<T> lt_clog1p(lt_complex<T> z) {
    T x = z.re, y = z.im;
    T re = (fabs(x) < (T)0.5 && fabs(y) < (T)0.5) ? (T)0.5 * log1p(x * (2 + x) + y * y) : log(hypot(1 + x, y));
    return lt_complex<T>(re, atan2(y, 1 + x));
}
/* The log1p op: NumPy's nc_log1p, log |1 + z| + i atan2(y, 1 + x), so that both devices give
   NumPy's numbers (the accurate lt_clog1p above serves asinh and atanh). */
template <typename T> __device__ lt_complex<T> lt_clog1p_numpy(lt_complex<T> z) {
    T one = 1 + z.re;
    return lt_complex<T>(log(hypot(one, z.im)), atan2(z.im, one));
}
template <typename T> __device__ lt_complex<T> lt_cexpm1(lt_complex<T> z) {
    T a = sin(z.im * (T)0.5);
    return lt_complex<T>(expm1(z.re) * cos(z.im) - 2 * a * a, exp(z.re) * sin(z.im));
}
template <typename T> __device__ lt_complex<T> lt_clog2(lt_complex<T> z) {
    lt_complex<T> r = lt_clog(z);
    return lt_complex<T>(r.re * (T)1.4426950408889634, r.im * (T)1.4426950408889634);
}
template <typename T> __device__ lt_complex<T> lt_clog10(lt_complex<T> z) {
    lt_complex<T> r = lt_clog(z);
    return lt_complex<T>(r.re * (T)0.4342944819032518, r.im * (T)0.4342944819032518);
}
template <typename T> __device__ lt_complex<T> lt_cexp2(lt_complex<T> z) {
    return lt_cexp(lt_complex<T>(z.re * (T)0.6931471805599453, z.im * (T)0.6931471805599453));
}
template <typename T> __device__ lt_complex<T> lt_csinh(lt_complex<T> z) {
    return lt_complex<T>(sinh(z.re) * cos(z.im), cosh(z.re) * sin(z.im));
}
template <typename T> __device__ lt_complex<T> lt_ccosh(lt_complex<T> z) {
    return lt_complex<T>(cosh(z.re) * cos(z.im), sinh(z.re) * sin(z.im));
}
/* Kahan's tanh: stable for large |re|, where sinh and cosh overflow. */
template <typename T> __device__ lt_complex<T> lt_ctanh(lt_complex<T> z) {
    T x = z.re, y = z.im;
    if (fabs(x) > (T)22) {
        T e = exp(-2 * fabs(x));
        return lt_complex<T>(copysign((T)1, x), 4 * sin(y) * cos(y) * e);
    }
    T t = tan(y), beta = 1 + t * t, s = sinh(x), rho = sqrt(1 + s * s), d = 1 + beta * s * s;
    return lt_complex<T>(beta * rho * s / d, t / d);
}
/* f(z) = -i g(iz) for the circular functions. */
template <typename T> __device__ __forceinline__ lt_complex<T> lt_times_i(lt_complex<T> z) { return lt_complex<T>(-z.im, z.re); }
template <typename T> __device__ __forceinline__ lt_complex<T> lt_times_minus_i(lt_complex<T> z) { return lt_complex<T>(z.im, -z.re); }
template <typename T> __device__ lt_complex<T> lt_csin(lt_complex<T> z) { return lt_times_minus_i(lt_csinh(lt_times_i(z))); }
template <typename T> __device__ lt_complex<T> lt_ccos(lt_complex<T> z) { return lt_ccosh(lt_times_i(z)); }
template <typename T> __device__ lt_complex<T> lt_ctan(lt_complex<T> z) { return lt_times_minus_i(lt_ctanh(lt_times_i(z))); }
/* asinh(z) = log(z + sqrt(z^2 + 1)), on the right half-plane (the left by symmetry), through log1p
   near 0: log1p(z + z^2 / (1 + sqrt(z^2 + 1))). */
template <typename T> __device__ lt_complex<T> lt_carcsinh(lt_complex<T> z) {
    bool flip = signbit(z.re);
    lt_complex<T> w = flip ? -z : z;
    lt_complex<T> z2 = w * w;
    lt_complex<T> s = lt_csqrt(z2 + lt_complex<T>(1));
    lt_complex<T> r = (hypot(w.re, w.im) < (T)0.5) ? lt_clog1p(w + lt_cdiv(z2, lt_complex<T>(1) + s)) : lt_clog(w + s);
    return flip ? -r : r;
}
template <typename T> __device__ lt_complex<T> lt_carcsin(lt_complex<T> z) { return lt_times_minus_i(lt_carcsinh(lt_times_i(z))); }
template <typename T> __device__ lt_complex<T> lt_carccos(lt_complex<T> z) {
    lt_complex<T> a = lt_carcsin(z);
    return lt_complex<T>((T)1.5707963267948966 - a.re, -a.im);
}
/* acosh(z) = log(z + sqrt(z + 1) sqrt(z - 1)) (Kahan's branch cuts). */
template <typename T> __device__ lt_complex<T> lt_carccosh(lt_complex<T> z) {
    return lt_clog(z + lt_csqrt(z + lt_complex<T>(1)) * lt_csqrt(z - lt_complex<T>(1)));
}
template <typename T> __device__ lt_complex<T> lt_carctanh(lt_complex<T> z) {
    lt_complex<T> a = lt_clog1p(z), b = lt_clog1p(-z);
    return lt_complex<T>((a.re - b.re) * (T)0.5, (a.im - b.im) * (T)0.5);
}
template <typename T> __device__ lt_complex<T> lt_carctan(lt_complex<T> z) { return lt_times_minus_i(lt_carctanh(lt_times_i(z))); }

/* The reductions' accumulators (kernels/cuda/accumulators.py) over complex values. */
template <typename T> __device__ __forceinline__ lt_complex<T> lt_add(lt_complex<T> a, lt_complex<T> b) { return a + b; }
template <typename T> __device__ __forceinline__ lt_complex<T> lt_mul(lt_complex<T> a, lt_complex<T> b) { return a * b; }
template <typename T> __device__ __forceinline__ lt_complex<T> lt_shfl_down(lt_complex<T> v, int offset, int width) {
    return lt_complex<T>(__shfl_down_sync(0xffffffffu, v.re, offset, width), __shfl_down_sync(0xffffffffu, v.im, offset, width));
}

/* npy_cpow: a ** 0 is 1; 0 ** b is 0 where re b > 0, else NaN; an integer exponent below 100 in
   magnitude by repeated squaring (its reciprocal for a negative one); else exp(b log a). */
template <typename T> __device__ lt_complex<T> lt_cpow(lt_complex<T> a, lt_complex<T> b) {
    if (b.re == 0 && b.im == 0) return lt_complex<T>(1);
    if (a.re == 0 && a.im == 0) return b.re > 0 ? lt_complex<T>(0) : lt_complex<T>(LT_NAN, LT_NAN);
    if (b.im == 0 && b.re == floor(b.re) && fabs(b.re) < 100) {
        int n = (int)b.re;
        if (n == 1) return a;
        if (n == 2) return a * a;
        if (n == 3) return a * a * a;
        int m = n < 0 ? -n : n;
        lt_complex<T> acc(1), p = a;
        for (int mask = 1;; mask <<= 1) {
            if (m & mask) acc = acc * p;
            if (m < (mask << 1)) break;
            p = p * p;
        }
        return n < 0 ? lt_cdiv(lt_complex<T>(1), acc) : acc;
    }
    return lt_cexp(lt_clog(a) * b);
}
"""
