"""2-D pooling over NHWC arrays on CUDA: generated CUDA C kernels, one per (direction, kind, dtype),
the shapes passed as arguments. Compiled like the elementwise kernels (NVRTC to cubin, disk cache:
kernels/cuda_compile.py) and launched through CuPy. Knows arrays only; the semantics are those of
kernels/pool_cpu.py (documented in lazytensor.ops.pooling), one thread per element written:
  - forward: per output element, a scan of its window;
  - backward: per input element, a gather over the windows that hold it (no atomics, so the sums
    are deterministic); max pooling recomputes each such window's argmax with the forward's scan.
"""
from __future__ import annotations

import numpy as np

from .render_cuda import CudaSource

_TYPES = {np.dtype(np.float16): ("__half", "float", "__half2float", "__float2half_rn"),
          np.dtype(np.float32): ("float", "float", "", ""),
          np.dtype(np.float64): ("double", "double", "", "")}

_HEAD = """{include}
typedef {storage} T;
typedef {acc} A;
#define LT_NEG_INF (-__longlong_as_double(0x7ff0000000000000LL))   // -inf without math.h
__device__ __forceinline__ A load(const T* p, long long i) {{ return {load}(p[i]); }}
__device__ __forceinline__ T store(A v) {{ return {store}(v); }}
#define SHAPE int N, int H, int W, int C, int P, int Q, int KH, int KW, int SH, int SW, int PH, int PW

// The argmax of window (n, p, q, c), as a cell index h * W + w: the forward max's scan, rows first,
// keeping the first maximum and the last NaN (PyTorch: val > max || isnan(val)).
__device__ __forceinline__ long long window_argmax(const T* x, int n, int p, int q, int c, SHAPE) {{
    int h0 = p * SH - PH, w0 = q * SW - PW;
    A best = (A)LT_NEG_INF;
    long long where = (long long)max(h0, 0) * W + max(w0, 0);
    for (int r = 0; r < KH; ++r) {{
        int h = h0 + r;
        if (h < 0 || h >= H) continue;
        for (int s = 0; s < KW; ++s) {{
            int w = w0 + s;
            if (w < 0 || w >= W) continue;
            A v = load(x, (((long long)n * H + h) * W + w) * C + c);
            if (v > best || isnan(v)) {{ best = v; where = (long long)h * W + w; }}
        }}
    }}
    return where;
}}
"""

_FORWARD = """
extern "C" __global__ void {name}(const T* __restrict__ x, T* __restrict__ y, long long total, SHAPE) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    int c = (int)(i % C); long long t = i / C;
    int q = (int)(t % Q); t /= Q;
    int p = (int)(t % P); int n = (int)(t / P);
    int h0 = p * SH - PH, w0 = q * SW - PW;
    A acc = {init};
    for (int r = 0; r < KH; ++r) {{
        int h = h0 + r;
        if (h < 0 || h >= H) continue;
        for (int s = 0; s < KW; ++s) {{
            int w = w0 + s;
            if (w < 0 || w >= W) continue;
            A v = load(x, (((long long)n * H + h) * W + w) * C + c);
            {update}
        }}
    }}
    y[i] = store({result});
}}
"""

_BACKWARD = """
extern "C" __global__ void {name}(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ dx,
                                  long long total, SHAPE) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    int c = (int)(i % C); long long t = i / C;
    int w = (int)(t % W); t /= W;
    int h = (int)(t % H); int n = (int)(t / H);
    int hp = h + PH, wp = w + PW;          // in padded coordinates: window p holds rows p*SH .. p*SH+KH-1
    int p_lo = hp < KH ? 0 : (hp - KH) / SH + 1, p_hi = min(hp / SH, P - 1);
    int q_lo = wp < KW ? 0 : (wp - KW) / SW + 1, q_hi = min(wp / SW, Q - 1);
    A acc = 0;
    for (int p = p_lo; p <= p_hi; ++p) {{
        for (int q = q_lo; q <= q_hi; ++q) {{
            {take}
        }}
    }}
    dx[i] = store(acc{scale});
}}
"""

_MAX_TAKE = ("if (window_argmax(x, n, p, q, c, N, H, W, C, P, Q, KH, KW, SH, SW, PH, PW) == (long long)h * W + w)\n"
             "                acc += load(g, (((long long)n * P + p) * Q + q) * C + c);")
_AVG_TAKE = "acc += load(g, (((long long)n * P + p) * Q + q) * C + c);"


def render_pool(direction: str, kind: str, dtype) -> CudaSource:
    """The CUDA C of one pooling kernel: direction "forward" or "backward", kind "max" or "avg"."""
    dtype = np.dtype(dtype)
    storage, acc, load, store = _TYPES[dtype]
    name = f"lt_{kind}_pool2d_{direction}_{dtype.name}"
    head = _HEAD.format(include="#include <cuda_fp16.h>" if dtype == np.float16 else "",
                        storage=storage, acc=acc, load=load, store=store)
    if direction == "forward":
        if kind == "max":
            body = _FORWARD.format(name=name, init="(A)LT_NEG_INF", result="acc",
                                   update="if (v > acc || isnan(v)) acc = v;")
        else:
            body = _FORWARD.format(name=name, init="0", result="acc / (A)(KH * KW)", update="acc += v;")
    else:
        body = _BACKWARD.format(name=name, take=_MAX_TAKE if kind == "max" else _AVG_TAKE,
                                scale="" if kind == "max" else " / (A)(KH * KW)")
    return CudaSource(name, head + body, dtype == np.float16, body)


_loaded: dict = {}      # (kernel name, device id) -> cupy function


def _function(compiler, source: CudaSource, device_id: int):
    key = (source.name, device_id)
    function = _loaded.get(key)
    if function is None:
        import cupy
        cubin, _, _, _ = compiler.cubin(source)
        with cupy.cuda.Device(device_id):
            module = cupy.cuda.function.Module()
            module.load(cubin)
            function = _loaded[key] = module.get_function(source.name)
    return function


_BLOCK = 256


def _launch(compiler, source, arrays, total, shape_args):
    if total == 0:
        return
    function = _function(compiler, source, arrays[-1].device.id)
    grid = ((total + _BLOCK - 1) // _BLOCK,)
    function(grid, (_BLOCK,), (*arrays, np.int64(total), *[np.int32(v) for v in shape_args]))


def _shape_args(in_shape, out_shape, kernel, stride, padding) -> tuple:
    n, h, w, c = in_shape
    return (n, h, w, c, out_shape[1], out_shape[2], *kernel, *stride, *padding)


def pool_forward(compiler, kind: str, x, kernel, stride, padding, out) -> None:
    """x, out: C-contiguous cupy arrays of one float dtype."""
    source = render_pool("forward", kind, x.dtype)
    _launch(compiler, source, (x, out), out.size, _shape_args(x.shape, out.shape, kernel, stride, padding))


def pool_backward(compiler, kind: str, x, g, kernel, stride, padding, out) -> None:
    """x (max pooling only; else any array of out's dtype), g, out: C-contiguous cupy arrays."""
    source = render_pool("backward", kind, out.dtype)
    _launch(compiler, source, (x, g, out), out.size, _shape_args(out.shape, g.shape, kernel, stride, padding))
