"""2-D pooling over NHWC arrays on CUDA: generated CUDA C kernels, one per (direction, kind, dtype),
the shapes passed as arguments. Compiled like the elementwise kernels (NVRTC to cubin, disk cache:
kernels/cuda_compile.py) and launched through CuPy. Knows arrays only; the semantics are those of
kernels/pool_cpu.py (documented in lazytensor.ops.pooling), one thread per element written:
  - forward: per output element, a scan of its window;
  - backward, windows that overlap: per input element, a gather over the windows that hold it (no
    atomics, so the sums are deterministic); max pooling recomputes each such window's argmax with
    the forward's scan;
  - backward, windows that do not overlap (stride >= kernel, as in VGG's and ResNet's 2x2/2 pools):
    per window, its argmax found once and every cell of the window written (the gradient at the
    argmax, zeros elsewhere; avg: the share of each cell). Each cell is written by one window at
    most, and cells no window holds (strides wider than the kernel, trailing rows) are zeroed first.
    The gather would recompute the window's argmax once per cell: kh * kw scans instead of one.
Indices are 32-bit where every array has fewer than 2**31 elements: 64-bit division and remainder
cost several times more instructions than the loads they address.
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
typedef {index} I;
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
    I i = (I)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (I)total) return;
    int c = (int)(i % C); I t = i / C;
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
    I i = (I)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (I)total) return;
    int c = (int)(i % C); I t = i / C;
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

_BACKWARD_WINDOWS = """
extern "C" __global__ void {name}(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ dx,
                                  long long total, SHAPE) {{
    I i = (I)blockIdx.x * blockDim.x + threadIdx.x;   // one thread per window (n, p, q, c)
    if (i >= (I)total) return;
    int c = (int)(i % C); I t = i / C;
    int q = (int)(t % Q); t /= Q;
    int p = (int)(t % P); int n = (int)(t / P);
    int h0 = p * SH - PH, w0 = q * SW - PW;
    A share = load(g, i){scale};
    {find}
    for (int r = 0; r < KH; ++r) {{
        int h = h0 + r;
        if (h < 0 || h >= H) continue;
        for (int s = 0; s < KW; ++s) {{
            int w = w0 + s;
            if (w < 0 || w >= W) continue;
            dx[(((I)n * H + h) * W + w) * C + c] = store({cell});
        }}
    }}
}}
"""

_MAX_TAKE = ("if (window_argmax(x, n, p, q, c, N, H, W, C, P, Q, KH, KW, SH, SW, PH, PW) == (long long)h * W + w)\n"
             "                acc += load(g, (((long long)n * P + p) * Q + q) * C + c);")
_AVG_TAKE = "acc += load(g, (((long long)n * P + p) * Q + q) * C + c);"


def render_pool(direction: str, kind: str, dtype, *, windows: bool = False, wide: bool = False) -> CudaSource:
    """The CUDA C of one pooling kernel: direction "forward" or "backward", kind "max" or "avg";
    windows: the backward that writes each window's cells (windows must not overlap); wide: 64-bit
    indices (an array of 2**31 elements or more)."""
    dtype = np.dtype(dtype)
    storage, acc, load, store = _TYPES[dtype]
    name = f"lt_{kind}_pool2d_{direction}{'_windows' if windows else ''}_{dtype.name}{'_i64' if wide else ''}"
    head = _HEAD.format(include="#include <cuda_fp16.h>" if dtype == np.float16 else "",
                        storage=storage, acc=acc, load=load, store=store, index="long long" if wide else "int")
    if windows:
        if kind == "max":
            body = _BACKWARD_WINDOWS.format(
                name=name, scale="",
                find="long long at = window_argmax(x, n, p, q, c, N, H, W, C, P, Q, KH, KW, SH, SW, PH, PW);",
                cell="(long long)h * W + w == at ? share : (A)0")
        else:
            body = _BACKWARD_WINDOWS.format(name=name, scale=" / (A)(KH * KW)", find="", cell="share")
    elif direction == "forward":
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
    function = _function(compiler, source, arrays[-1].device.id)
    grid = ((total + _BLOCK - 1) // _BLOCK,)
    function(grid, (_BLOCK,), (*arrays, np.int64(total), *[np.int32(v) for v in shape_args]))


def _shape_args(in_shape, out_shape, kernel, stride, padding) -> tuple:
    n, h, w, c = in_shape
    return (n, h, w, c, out_shape[1], out_shape[2], *kernel, *stride, *padding)


def _wide(*arrays) -> bool:
    return max(a.size for a in arrays) >= 2**31


def pool_forward(compiler, kind: str, x, kernel, stride, padding, out) -> None:
    """x, out: C-contiguous cupy arrays of one float dtype."""
    if out.size == 0:
        return
    source = render_pool("forward", kind, x.dtype, wide=_wide(x, out))
    _launch(compiler, source, (x, out), out.size, _shape_args(x.shape, out.shape, kernel, stride, padding))


def windows_apart(kernel, stride) -> bool:
    """Whether no two windows share a cell (the backward then writes per window)."""
    return stride[0] >= kernel[0] and stride[1] >= kernel[1]


def windows_cover(in_shape, out_shape, kernel, stride, padding) -> bool:
    """Whether windows that do not overlap hold every cell of the input: no gaps between them, and
    the last window reaching the last row and column."""
    return all(s == k and (o - 1) * s - pad + k >= size
               for size, o, k, s, pad in zip(in_shape[1:3], out_shape[1:3], kernel, stride, padding))


def pool_backward(compiler, kind: str, x, g, kernel, stride, padding, out) -> None:
    """x (max pooling only; else any array of out's dtype), g, out: C-contiguous cupy arrays."""
    if out.size == 0:
        return
    shape_args = _shape_args(out.shape, g.shape, kernel, stride, padding)
    wide = _wide(x, g, out)
    if not windows_apart(kernel, stride):
        _launch(compiler, render_pool("backward", kind, out.dtype, wide=wide), (x, g, out), out.size, shape_args)
        return
    if not windows_cover(out.shape, g.shape, kernel, stride, padding):
        out.fill(0)
    if g.size:
        _launch(compiler, render_pool("backward", kind, out.dtype, windows=True, wide=wide), (x, g, out), g.size,
                shape_args)
