"""CUDA C accumulator types of the reduction kernels (kernels/cuda/render_cuda_reduce.py): one struct per
reduction kind, each with the same four operations, so the loop skeletons are written once.

Design: docs/design/cuda-kernels.md, section "kernels/cuda/accumulators.py".
"""

ACCUMULATORS = r"""
template <int BYTES> struct lt_wrap_unsigned { typedef unsigned int type; };
template <> struct lt_wrap_unsigned<8> { typedef unsigned long long type; };

/* Integer sum and product modulo 2**bits; floats as IEEE does them. */
template <typename T>
__device__ __forceinline__ T lt_add(T a, T b) {
    typedef typename lt_wrap_unsigned<sizeof(T)>::type U;
    return (T)((U)a + (U)b);
}
template <typename T>
__device__ __forceinline__ T lt_mul(T a, T b) {
    typedef typename lt_wrap_unsigned<sizeof(T)>::type U;
    return (T)((U)a * (U)b);
}
__device__ __forceinline__ bool lt_add(bool a, bool b) { return a || b; }
__device__ __forceinline__ bool lt_mul(bool a, bool b) { return a && b; }
__device__ __forceinline__ float lt_add(float a, float b) { return a + b; }
__device__ __forceinline__ double lt_add(double a, double b) { return a + b; }
__device__ __forceinline__ float lt_mul(float a, float b) { return a * b; }
__device__ __forceinline__ double lt_mul(double a, double b) { return a * b; }

/* The identities of max and min. */
template <typename T> struct lt_limits;
template <> struct lt_limits<bool> {
    static __device__ __forceinline__ bool lowest() { return false; }
    static __device__ __forceinline__ bool highest() { return true; } };
template <> struct lt_limits<signed char> {
    static __device__ __forceinline__ signed char lowest() { return -128; }
    static __device__ __forceinline__ signed char highest() { return 127; } };
template <> struct lt_limits<short> {
    static __device__ __forceinline__ short lowest() { return -32768; }
    static __device__ __forceinline__ short highest() { return 32767; } };
template <> struct lt_limits<int> {
    static __device__ __forceinline__ int lowest() { return -2147483647 - 1; }
    static __device__ __forceinline__ int highest() { return 2147483647; } };
template <> struct lt_limits<long long> {
    static __device__ __forceinline__ long long lowest() { return -9223372036854775807LL - 1; }
    static __device__ __forceinline__ long long highest() { return 9223372036854775807LL; } };
template <> struct lt_limits<unsigned char> {
    static __device__ __forceinline__ unsigned char lowest() { return 0; }
    static __device__ __forceinline__ unsigned char highest() { return 255; } };
template <> struct lt_limits<unsigned short> {
    static __device__ __forceinline__ unsigned short lowest() { return 0; }
    static __device__ __forceinline__ unsigned short highest() { return 65535; } };
template <> struct lt_limits<unsigned int> {
    static __device__ __forceinline__ unsigned int lowest() { return 0u; }
    static __device__ __forceinline__ unsigned int highest() { return 4294967295u; } };
template <> struct lt_limits<unsigned long long> {
    static __device__ __forceinline__ unsigned long long lowest() { return 0ull; }
    static __device__ __forceinline__ unsigned long long highest() { return 18446744073709551615ull; } };
template <> struct lt_limits<float> {
    static __device__ __forceinline__ float lowest() { return -__int_as_float(0x7f800000); }
    static __device__ __forceinline__ float highest() { return __int_as_float(0x7f800000); } };
template <> struct lt_limits<double> {
    static __device__ __forceinline__ double lowest() { return -__longlong_as_double(0x7ff0000000000000LL); }
    static __device__ __forceinline__ double highest() { return __longlong_as_double(0x7ff0000000000000LL); } };

/* Warp shuffles of every accumulator field type: the narrow ones travel as int. */
template <typename T>
__device__ __forceinline__ T lt_shfl_down(T v, int offset, int width) {
    return (T)__shfl_down_sync(0xffffffffu, (int)v, offset, width);
}
__device__ __forceinline__ unsigned int lt_shfl_down(unsigned int v, int offset, int width) {
    return __shfl_down_sync(0xffffffffu, v, offset, width);
}
__device__ __forceinline__ long long lt_shfl_down(long long v, int offset, int width) {
    return __shfl_down_sync(0xffffffffu, v, offset, width);
}
__device__ __forceinline__ unsigned long long lt_shfl_down(unsigned long long v, int offset, int width) {
    return __shfl_down_sync(0xffffffffu, v, offset, width);
}
__device__ __forceinline__ float lt_shfl_down(float v, int offset, int width) {
    return __shfl_down_sync(0xffffffffu, v, offset, width);
}
__device__ __forceinline__ double lt_shfl_down(double v, int offset, int width) {
    return __shfl_down_sync(0xffffffffu, v, offset, width);
}

template <typename T> struct lt_sum {
    T a;
    __device__ __forceinline__ void init() { a = (T)0; }
    __device__ __forceinline__ void push(T x, long long) { a = lt_add(a, x); }
    __device__ __forceinline__ void merge(const lt_sum& o) { a = lt_add(a, o.a); }
    __device__ __forceinline__ lt_sum shfl_down(int off, int width) const {
        lt_sum o; o.a = lt_shfl_down(a, off, width); return o; }
};

template <typename T> struct lt_prod {
    T a;
    __device__ __forceinline__ void init() { a = (T)1; }
    __device__ __forceinline__ void push(T x, long long) { a = lt_mul(a, x); }
    __device__ __forceinline__ void merge(const lt_prod& o) { a = lt_mul(a, o.a); }
    __device__ __forceinline__ lt_prod shfl_down(int off, int width) const {
        lt_prod o; o.a = lt_shfl_down(a, off, width); return o; }
};

/* MAX: the maximum, else the minimum. A NaN, once in, stays (x != x is false for integers). */
template <typename T, bool MAX> struct lt_extreme {
    T a;
    static __device__ __forceinline__ bool beats(T x, T y) { return MAX ? x > y : x < y; }
    __device__ __forceinline__ void init() { a = MAX ? lt_limits<T>::lowest() : lt_limits<T>::highest(); }
    __device__ __forceinline__ void push(T x, long long) { if (beats(x, a) || x != x) a = x; }
    __device__ __forceinline__ void merge(const lt_extreme& o) { if ((beats(o.a, a) || o.a != o.a) && a == a) a = o.a; }
    __device__ __forceinline__ lt_extreme shfl_down(int off, int width) const {
        lt_extreme o; o.a = lt_shfl_down(a, off, width); return o; }
};

template <bool ANY> struct lt_logical {
    bool a;
    __device__ __forceinline__ void init() { a = !ANY; }
    __device__ __forceinline__ void push(bool x, long long) { a = ANY ? (a || x) : (a && x); }
    __device__ __forceinline__ void merge(const lt_logical& o) { push(o.a, 0); }
    __device__ __forceinline__ lt_logical shfl_down(int off, int width) const {
        lt_logical o; o.a = lt_shfl_down(a, off, width); return o; }
};

/* argmax (MAX) or argmin: the best value and its index; i < 0 means no value yet. Within one
   state, values arrive in increasing index order, so a strict comparison keeps the first. */
template <typename T, bool MAX> struct lt_arg {
    T v;
    long long i;
    static __device__ __forceinline__ bool beats(T x, T y) { return MAX ? x > y : x < y; }
    __device__ __forceinline__ void init() { v = (T)0; i = -1; }
    __device__ __forceinline__ void push(T x, long long index) {
        if (i < 0 || beats(x, v) || (x != x && v == v)) { v = x; i = index; }
    }
    __device__ __forceinline__ void merge(const lt_arg& o) {
        if (o.i < 0) return;
        bool take;
        if (i < 0) take = true;
        else if (o.v != o.v || v != v) take = o.v != o.v && (v == v || o.i < i);
        else take = beats(o.v, v) || (o.v == v && o.i < i);
        if (take) { v = o.v; i = o.i; }
    }
    __device__ __forceinline__ lt_arg shfl_down(int off, int width) const {
        lt_arg o; o.v = lt_shfl_down(v, off, width); o.i = lt_shfl_down(i, off, width); return o; }
};

/* Count, mean and sum of squared deviations, in double. push_counted is Welford's update with the
   reciprocal of the new count given: the lanes of one vector load always hold the same count, so
   they share one division.
   start/fold are the run scheme of the columns loops (render_cuda_reduce): Welford costs four
   double operations per value and a division per load step; the per-channel statistics of
   float16 data read 8 values per 16-byte load, so the double pipes were close to busy. There a
   state starts from the thread's first value, then
   takes runs of at most MOMENT_RUN (render_cuda_reduce) values, each given as the sums s1 = sum(d), s2 = sum(d * d) of
   its deviations d = x - m from the state's mean m before the run (three double operations per
   value); fold is then Chan's combination of the state with the run, simplified by the run's shift
   being m: m' = m + s1 / n', q' = q + s2 - s1 * s1 / n'. Accuracy does not depend on the mean: the
   sums are of deviations from a mean of the data, never of raw values, so data with a large mean
   and a small spread (1e4 +- 1, say) keep double precision; a run of L values loses at most about
   L * (L + 1) double roundings relative to q', whatever the data (a far shift adds as much
   between-run spread to q' as it costs in s2), against Welford's few. s2 - s1 * s1 / n' >= 0 with a
   margin of 1 / (run + 1) by Cauchy-Schwarz, so rounding cannot make q' decrease. */
struct lt_moments {
    double n, m, q;
    __device__ __forceinline__ void init() { n = 0.0; m = 0.0; q = 0.0; }
    __device__ __forceinline__ void push_counted(double x, double reciprocal) {
        n += 1.0;
        const double d = x - m;
        m = fma(d, reciprocal, m);
        q = fma(d, x - m, q);
    }
    __device__ __forceinline__ void push(double x, long long) { push_counted(x, 1.0 / (n + 1.0)); }
    __device__ __forceinline__ void start(double x) { n = 1.0; m = x; q = 0.0; }
    /* A run of deviations from m, `total` = n + its count, `reciprocal` = 1 / total (one division
       per thread: every lane of a thread holds the same count). */
    __device__ __forceinline__ void fold(double s1, double s2, double total, double reciprocal) {
        const double t = s1 * reciprocal;
        m += t;
        q += fma(-s1, t, s2);
        n = total;
    }
    __device__ __forceinline__ void merge(const lt_moments& o) {
        if (o.n == 0.0) return;
        if (n == 0.0) { n = o.n; m = o.m; q = o.q; return; }
        const double t = n + o.n;
        const double d = o.m - m;
        const double w = o.n / t;
        m = fma(d, w, m);
        q += o.q + d * d * n * w;
        n = t;
    }
    __device__ __forceinline__ lt_moments shfl_down(int off, int width) const {
        lt_moments o;
        o.n = lt_shfl_down(n, off, width); o.m = lt_shfl_down(m, off, width); o.q = lt_shfl_down(q, off, width);
        return o;
    }
};

/* One value of a moments run: its deviation d from the state's mean m into s1 += d, s2 += d * d. */
__device__ __forceinline__ void lt_deviation_push(double x, double m, double& s1, double& s2) {
    const double d = x - m;
    s1 += d;
    s2 = fma(d, d, s2);
}

/* Tree over `width` lanes (a power of two, at most 32; every lane of the warp calls it): lane 0 of
   each group of `width` ends with the group's state, combined in a fixed order. */
template <typename A>
__device__ __forceinline__ A lt_warp_reduce(A s, int width) {
    for (int off = width / 2; off > 0; off >>= 1) s.merge(s.shfl_down(off, width));
    return s;
}

/* The whole block's state in thread 0: warps first, then the warps' states in warp 0. */
template <typename A, int BLOCK>
__device__ __forceinline__ A lt_block_reduce(A s) {
    __shared__ A warp_states[BLOCK / 32];
    s = lt_warp_reduce(s, 32);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_states[warp] = s;
    __syncthreads();
    if (warp == 0) {
        if (lane < BLOCK / 32) s = warp_states[lane];
        s = lt_warp_reduce(s, BLOCK / 32);
    }
    return s;
}
"""
