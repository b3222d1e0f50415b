"""Pooling kernels over float16 NHWC whose channels are a multiple of 8 (every pool of VGG and ResNet):
one thread per 8 channels of a window, every load and store 16 bytes. The per-window kernels of
kernels/pool_cuda.py (the forward, the backward of windows that do not overlap, the argmax bytes of
windows that do) with the same arithmetic per channel: float accumulation, the forward's scan rows
first keeping the first maximum and the last NaN, the same roundings, so the same bits. The
scalar kernels move 2 bytes per load: VGG16-BN's pools took 0.45 ms of its 3.8 ms step on the H200
(forward 37 us, backward 53 us at 512 x 32 x 32 x 64, 2-3x the bytes' floor).
"""
from __future__ import annotations

import numpy as np

from .render_cuda import CudaSource

_HEAD = """#include <cuda_fp16.h>
typedef {index} I;
#define LT_NEG_INF (-__longlong_as_double(0x7ff0000000000000LL))   // -inf without math.h
#define SHAPE int N, int H, int W, int C, int P, int Q, int KH, int KW, int SH, int SW, int PH, int PW
union V8 {{ uint4 u; __half h[8]; }};
union B8 {{ uint2 u; unsigned char b[8]; }};
__device__ __forceinline__ V8 load8(const __half* p, I i) {{ V8 v; v.u = *reinterpret_cast<const uint4*>(p + i); return v; }}
__device__ __forceinline__ void store8(__half* p, I i, V8 v) {{ *reinterpret_cast<uint4*>(p + i) = v.u; }}
"""

_WINDOW = """
extern "C" __global__ void {name}({params}, long long total, SHAPE) {{
    I i = (I)blockIdx.x * blockDim.x + threadIdx.x;   // one thread per 8 channels of a window (n, p, q)
    if (i >= (I)total) return;
    int G = C >> 3;
    int c = (int)(i % G) << 3; I t = i / G;
    int q = (int)(t % Q); t /= Q;
    int p = (int)(t % P); int n = (int)(t / P);
    int h0 = p * SH - PH, w0 = q * SW - PW;
    I o = (((I)n * P + p) * Q + q) * C + c;          // the window's 8 channels in y, g and the argmax bytes
{body}
}}
"""

_CELLS = """    for (int r = 0; r < KH; ++r) {{
        int h = h0 + r;
        if (h < 0 || h >= H) continue;
        for (int s = 0; s < KW; ++s) {{
            int w = w0 + s;
            if (w < 0 || w >= W) continue;
            I cell = (((I)n * H + h) * W + w) * C + c;
{each}
        }}
    }}
"""

_FORWARD = """    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = {init};
{cells}    V8 out;
#pragma unroll
    for (int j = 0; j < 8; ++j) out.h[j] = __float2half_rn({result});
    store8(y, o, out);"""

_FORWARD_EACH = """            V8 v = load8(x, cell);
#pragma unroll
            for (int j = 0; j < 8; ++j) {{ float e = __half2float(v.h[j]); {update} }}"""

# Each channel's argmax as its offset r * KW + s in the window; where nothing beats -inf, the first
# cell inside the input (the scalar kernels' window_argmax).
_SCAN = """    float best[8]; int at[8];
    int first = (max(h0, 0) - h0) * KW + (max(w0, 0) - w0);
#pragma unroll
    for (int j = 0; j < 8; ++j) {{ best[j] = (float)LT_NEG_INF; at[j] = first; }}
{cells}"""

_SCAN_EACH = """            V8 v = load8(x, cell);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                float e = __half2float(v.h[j]);
                if (e > best[j] || isnan(e)) { best[j] = e; at[j] = r * KW + s; }
            }"""

_ARGMAX = """{scan}    B8 out;
#pragma unroll
    for (int j = 0; j < 8; ++j) out.b[j] = (unsigned char)at[j];
    *reinterpret_cast<uint2*>(argmax + o) = out.u;"""

_BACKWARD_MAX = """{scan}    V8 gv = load8(g, o);
{cells}"""

_BACKWARD_MAX_EACH = """            V8 out;
#pragma unroll
            for (int j = 0; j < 8; ++j)
                out.h[j] = __float2half_rn(r * KW + s == at[j] ? __half2float(gv.h[j]) : 0.0f);
            store8(dx, cell, out);"""

_BACKWARD_AVG = """    V8 gv = load8(g, o), out;
#pragma unroll
    for (int j = 0; j < 8; ++j) out.h[j] = __float2half_rn(__half2float(gv.h[j]) / (float)(KH * KW));
{cells}"""

_X, _Y, _G, _DX = ("const __half* __restrict__ x", "__half* __restrict__ y", "const __half* __restrict__ g",
                   "__half* __restrict__ dx")


def _cells(each: str) -> str:
    return _CELLS.format(each=each)


def render_vector_pool(direction: str, kind: str, wide: bool = False) -> CudaSource:
    """direction "forward" (max or avg), "backward_windows" (windows that do not overlap: each window
    writes its cells) or "argmax" (max: each window's argmax byte)."""
    name = f"lt_{kind}_pool2d_{direction}_vec8_float16{'_i64' if wide else ''}"
    if direction == "forward":
        update = "if (e > acc[j] || isnan(e)) acc[j] = e;" if kind == "max" else "acc[j] += e;"
        body = _FORWARD.format(init="(float)LT_NEG_INF" if kind == "max" else "0.0f",
                               result="acc[j]" if kind == "max" else "acc[j] / (float)(KH * KW)",
                               cells=_cells(_FORWARD_EACH.format(update=update)))
        params = f"{_X}, {_Y}"
    elif direction == "argmax" and kind == "max":
        body = _ARGMAX.format(scan=_SCAN.format(cells=_cells(_SCAN_EACH)))
        params = f"{_X}, unsigned char* __restrict__ argmax"
    elif direction == "backward_windows":
        if kind == "max":
            body = _BACKWARD_MAX.format(scan=_SCAN.format(cells=_cells(_SCAN_EACH)), cells=_cells(_BACKWARD_MAX_EACH))
        else:
            body = _BACKWARD_AVG.format(cells=_cells("            store8(dx, cell, out);"))
        params = f"{_X}, {_G}, {_DX}"
    else:
        raise ValueError(f"no vectorized pooling kernel for {direction!r} {kind!r}")
    kernel = _WINDOW.format(name=name, params=params, body=body)
    return CudaSource(name, _HEAD.format(index="long long" if wide else "int") + kernel, True, kernel)


def vectorizable(dtype, channels: int, *arrays) -> bool:
    """float16 activations, 8 channels a thread, every array 16-byte aligned: the vectorized kernels
    take them."""
    return (np.dtype(dtype) == np.float16 and channels % 8 == 0
            and all(getattr(a.data, "ptr", 1) % 16 == 0 for a in arrays))      # (NumPy stand-ins: no)
