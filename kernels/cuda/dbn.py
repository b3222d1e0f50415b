"""The dBN stage of the CBR backward (drelu + dBN) as hand-written CUDA C kernels over float16,
bfloat16 or float32 NHWC activations with K a multiple of 8, each thread moving 8 channels per access
(16 bytes of float16 or bfloat16, two 16-byte accesses of float32).

Design: docs/design/cbr-backward.md, section "kernels/cuda/dbn.py".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lazytensor.kernels.cuda.render_cuda import CudaSource

BLOCK_THREADS = 256         # the most threads of a block; the shared sums buffer is sized for it
FINISH_ROWS = 32            # lt_dbn_finish: threads per channel (blockDim.y), each summing every 32nd partial
VECTOR = 8                  # channels per access: one mask byte
DTYPES = ("float16", "bfloat16", "float32")

_HEAD = r"""#include <cuda_fp16.h>
#define RELU {relu}
// 8 float16 channels: one 16-byte vector
typedef uint4 lt_vec8;
__device__ __forceinline__ lt_vec8 lt_load8(const lt_vec8* p) {{ return __ldg(p); }}

// 8 float16 values of one 16-byte vector as floats, and back (round to nearest even).
__device__ __forceinline__ void lt_unpack8(uint4 v, float f[8]) {{
    const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {{ float2 p = __half22float2(h[i]); f[2 * i] = p.x; f[2 * i + 1] = p.y; }}
}}
__device__ __forceinline__ uint4 lt_pack8(const float f[8]) {{
    uint4 v;
    __half2* h = reinterpret_cast<__half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
    return v;
}}
// dY' as 16 bytes, bit by bit (d(skip) of the residual form): half j kept where mask bit j is set, else +0
__device__ __forceinline__ uint4 lt_select8(uint4 w, unsigned int m) {{
    unsigned int* u = reinterpret_cast<unsigned int*>(&w);
#pragma unroll
    for (int i = 0; i < 4; ++i)     // halves 2i (low 16 bits) and 2i + 1 (high) of word i
        u[i] &= (((m >> (2 * i)) & 1u) ? 0x0000FFFFu : 0u) | (((m >> (2 * i + 1)) & 1u) ? 0xFFFF0000u : 0u);
    return w;
}}
"""

# bfloat16: the float16 vector with bfloat16 pairs (same 16-bit lanes, so the same bit selection)
_HEAD_BF16 = (_HEAD.replace("cuda_fp16.h", "cuda_bf16.h").replace("8 float16", "8 bfloat16")
              .replace("__half22float2", "__bfloat1622float2").replace("__floats2half2_rn", "__floats2bfloat162_rn")
              .replace("__half2", "__nv_bfloat162"))

_HEAD_F32 = r"""#define RELU {relu}
// 8 float32 channels: two 16-byte vectors
struct __align__(16) lt_vec8 {{ float4 lo, hi; }};
__device__ __forceinline__ lt_vec8 lt_load8(const lt_vec8* p) {{
    lt_vec8 v;
    v.lo = __ldg(&p->lo);
    v.hi = __ldg(&p->hi);
    return v;
}}
__device__ __forceinline__ void lt_unpack8(lt_vec8 v, float f[8]) {{
    f[0] = v.lo.x; f[1] = v.lo.y; f[2] = v.lo.z; f[3] = v.lo.w;
    f[4] = v.hi.x; f[5] = v.hi.y; f[6] = v.hi.z; f[7] = v.hi.w;
}}
__device__ __forceinline__ lt_vec8 lt_pack8(const float f[8]) {{
    lt_vec8 v;
    v.lo = make_float4(f[0], f[1], f[2], f[3]);
    v.hi = make_float4(f[4], f[5], f[6], f[7]);
    return v;
}}
// dY' bit by bit (d(skip) of the residual form): float j kept where mask bit j is set, else +0
__device__ __forceinline__ float lt_keep(float g, unsigned int m, int j) {{
    return __uint_as_float(__float_as_uint(g) & (((m >> j) & 1u) ? 0xFFFFFFFFu : 0u));
}}
__device__ __forceinline__ lt_vec8 lt_select8(lt_vec8 w, unsigned int m) {{
    w.lo.x = lt_keep(w.lo.x, m, 0); w.lo.y = lt_keep(w.lo.y, m, 1); w.lo.z = lt_keep(w.lo.z, m, 2);
    w.lo.w = lt_keep(w.lo.w, m, 3); w.hi.x = lt_keep(w.hi.x, m, 4); w.hi.y = lt_keep(w.hi.y, m, 5);
    w.hi.z = lt_keep(w.hi.z, m, 6); w.hi.w = lt_keep(w.hi.w, m, 7);
    return w;
}}
"""

_MASKED = r"""
// dY' of channel j of a vector: dY where the mask bit is set, else +0 (a select: NaN/inf behind a closed ReLU give 0)
__device__ __forceinline__ float lt_masked(float g, unsigned int m, int j) {{
#if RELU
    return ((m >> j) & 1u) ? g : 0.0f;
#else
    return g;
#endif
}}
"""

_SUMS = r"""
// One row's vector into the thread's sums: s0 += dY', s1 += dY' * (x - mean)
__device__ __forceinline__ void lt_accumulate(lt_vec8 gv, lt_vec8 cv, unsigned int m, const float mu[8], float s0[8],
                                              float s1[8]) {{
    float g[8], c[8];
    lt_unpack8(gv, g);
    lt_unpack8(cv, c);
#pragma unroll
    for (int j = 0; j < 8; ++j) {{
        const float d = lt_masked(g[j], m, j);
        s0[j] = __fadd_rn(s0[j], d);
        s1[j] = __fmaf_rn(d, __fsub_rn(c[j], mu[j]), s1[j]);
    }}
}}

extern "C" __global__ void __launch_bounds__(256, 4) {name}(
        const lt_vec8* __restrict__ dy, const lt_vec8* __restrict__ x, const unsigned char* __restrict__ mask,
        const float* __restrict__ mean, float* __restrict__ partial, lt_vec8* __restrict__ skip, int write_skip,
        long long rows, int V) {{
    // write_skip (the residual form): d(skip) = dY' written from the dY and mask just read, no pass of its own
    __shared__ float red[16 * 256];     // [value q][thread row][thread column]: q < 8 sum dY', else sum dY' * (x - mean)
    const int TX = blockDim.x, TY = blockDim.y, K = V * 8;
    const int v = blockIdx.y * TX + threadIdx.x;
    float s0[8], s1[8], mu[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {{ s0[j] = 0.0f; s1[j] = 0.0f; mu[j] = 0.0f; }}
    if (v < V) {{
#pragma unroll
        for (int j = 0; j < 8; ++j) mu[j] = mean[v * 8 + j];
        const long long stride = (long long)gridDim.x * TY;
        long long r = (long long)blockIdx.x * TY + threadIdx.y;
        // two rows per trip: both rows' loads are in flight before either is summed
        for (; r + stride < rows; r += 2 * stride) {{
            const long long e0 = r * V + v, e1 = (r + stride) * V + v;   // a vector's index is its mask byte's
            const lt_vec8 g0 = lt_load8(dy + e0), c0 = lt_load8(x + e0), g1 = lt_load8(dy + e1), c1 = lt_load8(x + e1);
#if RELU
            const unsigned int m0 = __ldg(mask + e0), m1 = __ldg(mask + e1);
#else
            const unsigned int m0 = 0u, m1 = 0u;
#endif
            lt_accumulate(g0, c0, m0, mu, s0, s1);
            lt_accumulate(g1, c1, m1, mu, s0, s1);
#if RELU
            if (write_skip) {{ skip[e0] = lt_select8(g0, m0); skip[e1] = lt_select8(g1, m1); }}
#endif
        }}
        if (r < rows) {{
            const long long e = r * V + v;
#if RELU
            const unsigned int m = __ldg(mask + e);
#else
            const unsigned int m = 0u;
#endif
            const lt_vec8 g = lt_load8(dy + e);
            lt_accumulate(g, lt_load8(x + e), m, mu, s0, s1);
#if RELU
            if (write_skip) skip[e] = lt_select8(g, m);
#endif
        }}
    }}
    const int t = threadIdx.y * TX + threadIdx.x;
#pragma unroll
    for (int j = 0; j < 8; ++j) {{
        red[(j * TY + threadIdx.y) * TX + threadIdx.x] = s0[j];
        red[((8 + j) * TY + threadIdx.y) * TX + threadIdx.x] = s1[j];
    }}
    __syncthreads();
    // 16 * TX results per block, each the sum of a column of TY values, in a fixed order
    for (int o = t; o < 16 * TX; o += TX * TY) {{
        const int q = o / TX, col = o - q * TX;
        float s = 0.0f;
        for (int y = 0; y < TY; ++y) s = __fadd_rn(s, red[(q * TY + y) * TX + col]);
        const int vv = blockIdx.y * TX + col;
        if (vv < V) partial[((long long)blockIdx.x * 2 + (q >> 3)) * K + vv * 8 + (q & 7)] = s;
    }}
}}
"""

_FINISH = r"""
extern "C" __global__ void __launch_bounds__(1024) {name}(const float* __restrict__ partial,
        const float* __restrict__ inv_var, float* __restrict__ sums, int blocks, int K) {{
    // blockDim (32, 32): threadIdx.x picks one of the 2K (lane, channel) results, threadIdx.y every 32nd block
    __shared__ double red[32][33];
    const int q = blockIdx.x * 32 + threadIdx.x;     // lane * K + channel
    double acc = 0.0;
    if (q < 2 * K)
        for (int b = threadIdx.y; b < blocks; b += 32) acc += (double)partial[(long long)b * 2 * K + q];
    red[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && q < 2 * K) {{
        double s = 0.0;
        for (int y = 0; y < 32; ++y) s += red[y][threadIdx.x];
        const int lane = q / K, ch = q - lane * K;
        if (lane == 1) s *= (double)inv_var[ch];
        sums[ch * 2 + lane] = (float)s;
    }}
}}
"""

_DX = r"""
// One row's vector of d(conv_out): A * dY' + B + C * (x - mean)
__device__ __forceinline__ lt_vec8 lt_dx8(lt_vec8 gv, lt_vec8 cv, unsigned int m, const float a[8], const float b[8],
                                        const float c[8], const float mu[8]) {{
    float g[8], xc[8], d[8];
    lt_unpack8(gv, g);
    lt_unpack8(cv, xc);
#pragma unroll
    for (int j = 0; j < 8; ++j)
        d[j] = __fmaf_rn(c[j], __fsub_rn(xc[j], mu[j]), __fmaf_rn(a[j], lt_masked(g[j], m, j), b[j]));
    return lt_pack8(d);
}}

extern "C" __global__ void __launch_bounds__(256, 3) {name}(
        const lt_vec8* __restrict__ dy, const lt_vec8* __restrict__ x, const unsigned char* __restrict__ mask,
        const float* __restrict__ mean, const float* __restrict__ inv_var, const float* __restrict__ gamma,
        const float* __restrict__ sums, lt_vec8* __restrict__ out, long long rows, int V, float per_value) {{
    const int TX = blockDim.x, TY = blockDim.y;
    const int v = blockIdx.y * TX + threadIdx.x;
    if (v >= V) return;
    float a[8], b[8], c[8], mu[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {{
        const int ch = v * 8 + j;
        const float iv = inv_var[ch];
        a[j] = __fmul_rn(gamma[ch], iv);
        b[j] = -__fmul_rn(a[j], __fmul_rn(sums[2 * ch], per_value));
        c[j] = -__fmul_rn(__fmul_rn(a[j], iv), __fmul_rn(sums[2 * ch + 1], per_value));
        mu[j] = mean[ch];
    }}
    const long long stride = (long long)gridDim.x * TY;
    long long i = (long long)blockIdx.x * TY + threadIdx.y;
    // rows from the last: those lt_dbn_sums read last are still in L2; two rows per trip, both loaded first
    for (; i + stride < rows; i += 2 * stride) {{
        const long long e0 = (rows - 1 - i) * V + v, e1 = (rows - 1 - i - stride) * V + v;
        const lt_vec8 g0 = lt_load8(dy + e0), c0 = lt_load8(x + e0), g1 = lt_load8(dy + e1), c1 = lt_load8(x + e1);
#if RELU
        const unsigned int m0 = __ldg(mask + e0), m1 = __ldg(mask + e1);
#else
        const unsigned int m0 = 0u, m1 = 0u;
#endif
        out[e0] = lt_dx8(g0, c0, m0, a, b, c, mu);
        out[e1] = lt_dx8(g1, c1, m1, a, b, c, mu);
    }}
    if (i < rows) {{
        const long long e = (rows - 1 - i) * V + v;
#if RELU
        const unsigned int m = __ldg(mask + e);
#else
        const unsigned int m = 0u;
#endif
        out[e] = lt_dx8(lt_load8(dy + e), lt_load8(x + e), m, a, b, c, mu);
    }}
}}
"""

_DRELU = r"""
extern "C" __global__ void __launch_bounds__(256) {name}(const lt_vec8* __restrict__ dy,
        const unsigned char* __restrict__ mask, lt_vec8* __restrict__ out, long long vectors) {{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < vectors; e += stride) {{
        out[e] = lt_select8(lt_load8(dy + e), __ldg(mask + e));
    }}
}}
"""


def kernel_names(relu: bool) -> dict:
    tag = "relu" if relu else "bn"
    names = {"sums": f"lt_dbn_sums_{tag}", "finish": "lt_dbn_finish", "dx": f"lt_dbn_dx_{tag}"}
    if relu:
        names["drelu"] = "lt_dbn_drelu"
    return names


def render_dbn(relu: bool, dtype="float16") -> CudaSource:
    """One translation unit with the stage's kernels for the ReLU form (relu=True: the mask is read,
    and lt_dbn_drelu is there for d(skip)) or the batch_norm form (relu=False: no mask), over float16
    bfloat16 or float32 activations (the same kernels over another 8-channel vector type)."""
    dtype = np.dtype(dtype).name
    if dtype not in DTYPES:
        raise ValueError(f"the dBN kernels take {' or '.join(DTYPES)} activations; got {dtype}")
    names = kernel_names(relu)
    body = (_SUMS.format(name=names["sums"]) + _FINISH.format(name=names["finish"])
            + _DX.format(name=names["dx"]) + (_DRELU.format(name=names["drelu"]) if relu else ""))
    heads = {"float16": _HEAD, "bfloat16": _HEAD_BF16, "float32": _HEAD_F32}
    head = heads[dtype].format(relu=1 if relu else 0) + _MASKED.format()
    suffix = "" if dtype == "float16" else f"_{dtype}"
    return CudaSource(f"lt_dbn_{'relu' if relu else 'bn'}{suffix}", head + body, dtype == "float16", body,
                      bfloat16=dtype == "bfloat16")


@dataclass(frozen=True)
class DbnGeometry:
    """The launch shapes of the stage's kernels over `rows` rows of K channels (V = K / 8 vectors)."""
    rows: int
    V: int
    block: tuple        # (TX, TY, 1) for lt_dbn_sums and lt_dbn_dx
    sums_grid: tuple    # (row blocks, column chunks, 1)
    dx_grid: tuple
    finish_grid: tuple
    drelu_grid: tuple

    @property
    def partial_rows(self) -> int:
        """The blocks of lt_dbn_sums along the rows: the partial sums' first axis."""
        return self.sums_grid[0]

    def describe(self) -> str:
        return (f"{self.rows} rows x {self.V} vectors of 8 channels; blocks of {self.block[0]}x{self.block[1]} "
                f"threads; sums grid {self.sums_grid[:2]}, finish grid {self.finish_grid[:1]}, "
                f"d(conv_out) grid {self.dx_grid[:2]}")


def dbn_geometry(rows: int, k: int, sm_count: int, sums_blocks_per_sm: int = 4, dx_blocks_per_sm: int = 3
                 ) -> DbnGeometry:
    """TX = min(V, 256) vector columns by TY = 256 // TX rows per block; blocks_per_sm blocks per SM
    in all (the row blocks split between the column chunks): the occupancy each kernel's
    __launch_bounds__ guarantees (4 and 3 blocks of 256 threads), so the grid is one wave and each
    thread strides over rows; never more row blocks than there are row groups. Few row blocks also
    keep the partial sums small (the finish reads them all)."""
    if k % VECTOR:
        raise ValueError(f"the dBN kernels take K a multiple of {VECTOR}; got K = {k}")
    v = k // VECTOR
    tx = min(v, BLOCK_THREADS)
    ty = BLOCK_THREADS // tx
    chunks = -(-v // tx)
    row_groups = max(1, -(-rows // ty))

    def grid(per_sm):
        return (max(1, min(row_groups, (sm_count * per_sm) // chunks)), chunks, 1)

    vectors = rows * v
    return DbnGeometry(rows, v, (tx, ty, 1), grid(sums_blocks_per_sm), grid(dx_blocks_per_sm),
                       (-(-2 * k // 32), 1, 1),
                       (max(1, min(-(-vectors // BLOCK_THREADS), sm_count * 8)), 1, 1))


_loaded: dict = {}      # (relu, dtype name, device id) -> {role: cupy function}


def load(compiler, relu: bool, device_id: int, dtype="float16") -> dict:
    """{role: cupy function} of the stage's kernels on the device for activations of `dtype`:
    compiled (or read from the cubin cache) and loaded once per process."""
    key = (relu, np.dtype(dtype).name, device_id)
    functions = _loaded.get(key)
    if functions is None:
        import cupy
        source = render_dbn(relu, dtype)
        cubin, _, _, _ = compiler.cubin(source)
        with cupy.cuda.Device(device_id):
            module = cupy.cuda.function.Module()
            module.load(cubin)
            functions = _loaded[key] = {role: module.get_function(name)
                                        for role, name in kernel_names(relu).items()}
    return functions


def sm_count(device_id: int) -> int:
    import cupy
    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


def dbn_sums(compiler, geometry: DbnGeometry, dy, x, mask, mean, inv_var, partial, sums, skip=None) -> None:
    """sums (K, 2) float32 = [sum dY', sum dY' * x_hat] per channel; partial: float32
    (geometry.partial_rows, 2, K) scratch. dy, x: dense float16 or float32 (rows, K), 16-byte aligned; mask:
    the packed bits (None for the no-ReLU form); mean, inv_var: float32 (K,). skip (the residual
    form, with a mask): d(skip) = dY' written on the way, in dy's dtype (rows, K), 16-byte aligned."""
    if skip is not None and mask is None:
        raise ValueError("dbn_sums: d(skip) is dY * mask; the no-ReLU form has no mask")
    f = load(compiler, mask is not None, sums.device.id, x.dtype)
    rows, k = np.int64(geometry.rows), 8 * geometry.V
    f["sums"](geometry.sums_grid, geometry.block,
              (dy, x, mask if mask is not None else dy, mean, partial, skip if skip is not None else partial,
               np.int32(skip is not None), rows, np.int32(geometry.V)))
    f["finish"](geometry.finish_grid, (32, FINISH_ROWS, 1),
                (partial, inv_var, sums, np.int32(geometry.partial_rows), np.int32(k)))


def dbn_dx(compiler, geometry: DbnGeometry, dy, x, mask, mean, inv_var, gamma, sums, out, count: int) -> None:
    """out (rows, K) in x's dtype = d(conv_out) from dY, the mask (None: no ReLU), x and the sums."""
    f = load(compiler, mask is not None, out.device.id, out.dtype)
    f["dx"](geometry.dx_grid, geometry.block,
            (dy, x, mask if mask is not None else dy, mean, inv_var, gamma, sums, out, np.int64(geometry.rows),
             np.int32(geometry.V), np.float32(1.0 / count)))


def dbn_drelu(compiler, geometry: DbnGeometry, dy, mask, out) -> None:
    """out = dY' (d(skip) of the residual form), in dy's dtype (rows, K)."""
    f = load(compiler, True, out.device.id, out.dtype)
    f["drelu"](geometry.drelu_grid, (BLOCK_THREADS, 1, 1), (dy, mask, out, np.int64(geometry.rows * geometry.V)))


def aligned(*arrays) -> bool:
    """Whether every array starts on a 16-byte boundary (the kernels' vector accesses need it)."""
    return all((a.ctypes.data if isinstance(a, np.ndarray) else a.data.ptr) % 16 == 0 for a in arrays)
