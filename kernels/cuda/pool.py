"""2-D pooling over NHWC arrays on CUDA: generated CUDA C kernels, one per (direction, kind, dtype),
the shapes passed as arguments; the semantics are those of kernels/cpu/pool.py.

Design: docs/design/cuda-kernels.md, section "kernels/cuda/pool.py".
"""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.cuda.render_cuda import CudaSource
from lazytensor.kernels.ops import BFLOAT16, is_float

_TYPES = {np.dtype(np.float16): ("__half", "float", "__half2float", "__float2half_rn"),
          np.dtype(np.float32): ("float", "float", "", ""),
          np.dtype(np.float64): ("double", "double", "", ""),
          BFLOAT16: ("__nv_bfloat16", "float", "__bfloat162float", "__float2bfloat16_rn")}
_INCLUDES = {np.dtype(np.float16): "#include <cuda_fp16.h>", BFLOAT16: "#include <cuda_bf16.h>"}

_HEAD = """{include}
typedef {storage} T;
typedef {acc} A;
typedef {index} I;
#define VEC {vec}
#define LT_NEG_INF (-__longlong_as_double(0x7ff0000000000000LL))   // -inf without math.h
// VEC channels of one cell, moved by one aligned load or store; B: their argmax bytes.
struct __align__(sizeof(T) * VEC) V {{ T v[VEC]; }};
struct __align__(VEC) B {{ unsigned char v[VEC]; }};
__device__ __forceinline__ A cvt(T v) {{ return {load}(v); }}
__device__ __forceinline__ T store(A v) {{ return {store}(v); }}
__device__ __forceinline__ V loadv(const T* p, I i) {{ return *(const V*)(p + i); }}
__device__ __forceinline__ void storev(T* p, I i, const V& v) {{ *(V*)(p + i) = v; }}
#define SHAPE int N, int H, int W, int C, int P, int Q, int KH, int KW, int SH, int SW, int PH, int PW
#define SHAPE_ARGS N, H, W, C, P, Q, KH, KW, SH, SW, PH, PW
// The window (n, p, q, c) of the flat element index e over (N, P, Q, C).
#define WINDOW_OF(e) I t_ = (e) / C; int c = (int)((e) % C); int q = (int)(t_ % Q); t_ /= Q; \
                     int p = (int)(t_ % P); int n = (int)(t_ / P)
// The cells (h, w) of window (p, q) inside the image, rows first.
#define FOR_CELLS(p, q) for (int h = (p) * SH - PH, h_end = h + KH; h < h_end; ++h) if (h >= 0 && h < H) \
                        for (int w = (q) * SW - PW, w_end = w + KW; w < w_end; ++w) if (w >= 0 && w < W)

// The argmax of window (n, p, q) for channels c .. c + VEC - 1, each as a cell index h * W + w:
// the forward max's scan, keeping the first maximum and the last NaN (PyTorch: val > max || isnan(val)).
__device__ __forceinline__ void window_argmax(const T* x, int n, int p, int q, int c, int* where, SHAPE) {{
    A best[VEC];
    int first = max(p * SH - PH, 0) * W + max(q * SW - PW, 0);
    #pragma unroll
    for (int k = 0; k < VEC; ++k) {{ best[k] = (A)LT_NEG_INF; where[k] = first; }}
    FOR_CELLS(p, q) {{
        V v = loadv(x, (((I)n * H + h) * W + w) * C + c);
        #pragma unroll
        for (int k = 0; k < VEC; ++k) {{
            A a = cvt(v.v[k]);
            if (a > best[k] || isnan(a)) {{ best[k] = a; where[k] = h * W + w; }}
        }}
    }}
}}
"""

# Each thread owns VEC channels of one window (forward, backward_windows, argmax) or of one input
# cell (the gathers); `total` counts those chunks.
_THREAD = """    I i = (I)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (I)total) return;
    I e = i * VEC;"""

_FORWARD = """
extern "C" __global__ void {name}(const T* __restrict__ x, T* __restrict__ y, long long total, SHAPE) {{
{thread}
    WINDOW_OF(e);
    A acc[VEC];
    #pragma unroll
    for (int k = 0; k < VEC; ++k) acc[k] = {init};
    FOR_CELLS(p, q) {{
        V v = loadv(x, (((I)n * H + h) * W + w) * C + c);
        #pragma unroll
        for (int k = 0; k < VEC; ++k) {{ A a = cvt(v.v[k]); {update} }}
    }}
    V o;
    #pragma unroll
    for (int k = 0; k < VEC; ++k) o.v[k] = store({result});
    storev(y, e, o);
}}
"""

_BACKWARD = """
extern "C" __global__ void {name}({first}, const T* __restrict__ g, T* __restrict__ dx,
                                  long long total, SHAPE) {{
{thread}
    I t = e / C; int c = (int)(e % C);
    int w = (int)(t % W); t /= W;
    int h = (int)(t % H); int n = (int)(t / H);
    int hp = h + PH, wp = w + PW;          // in padded coordinates: window p holds rows p*SH .. p*SH+KH-1
    int p_lo = hp < KH ? 0 : (hp - KH) / SH + 1, p_hi = min(hp / SH, P - 1);
    int q_lo = wp < KW ? 0 : (wp - KW) / SW + 1, q_hi = min(wp / SW, Q - 1);
    A acc[VEC];
    #pragma unroll
    for (int k = 0; k < VEC; ++k) acc[k] = 0;
    for (int p = p_lo; p <= p_hi; ++p) {{
        for (int q = q_lo; q <= q_hi; ++q) {{
            I o = (((I)n * P + p) * Q + q) * C + c;
            V gv = loadv(g, o);
            {take}
        }}
    }}
    V out;
    #pragma unroll
    for (int k = 0; k < VEC; ++k) out.v[k] = store(acc[k]{scale});
    storev(dx, e, out);
}}
"""

_BACKWARD_WINDOWS = """
extern "C" __global__ void {name}(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ dx,
                                  long long total, SHAPE) {{
{thread}
    WINDOW_OF(e);
    V gv = loadv(g, e);
    A share[VEC];
    #pragma unroll
    for (int k = 0; k < VEC; ++k) share[k] = cvt(gv.v[k]){scale};
    {find}
    FOR_CELLS(p, q) {{
        V o;
        #pragma unroll
        for (int k = 0; k < VEC; ++k) o.v[k] = store({cell});
        storev(dx, (((I)n * H + h) * W + w) * C + c, o);
    }}
}}
"""

_ARGMAX = """
extern "C" __global__ void {name}(const T* __restrict__ x, unsigned char* __restrict__ arg, long long total, SHAPE) {{
{thread}
    WINDOW_OF(e);
    int where[VEC];
    window_argmax(x, n, p, q, c, where, SHAPE_ARGS);
    B b;
    #pragma unroll
    for (int k = 0; k < VEC; ++k)
        b.v[k] = (unsigned char)((where[k] / W - (p * SH - PH)) * KW + (where[k] % W - (q * SW - PW)));
    *(B*)(arg + e) = b;
}}
"""

_MAX_TAKE = """int where[VEC];
            window_argmax(x, n, p, q, c, where, SHAPE_ARGS);
            #pragma unroll
            for (int k = 0; k < VEC; ++k) if (where[k] == h * W + w) acc[k] += cvt(gv.v[k]);"""
_AVG_TAKE = """#pragma unroll
            for (int k = 0; k < VEC; ++k) acc[k] += cvt(gv.v[k]);"""
_INDEXED_TAKE = """B b = *(const B*)(arg + o);
            int place = (h - (p * SH - PH)) * KW + (w - (q * SW - PW));
            #pragma unroll
            for (int k = 0; k < VEC; ++k) if (b.v[k] == place) acc[k] += cvt(gv.v[k]);"""

KERNELS = ("forward", "backward", "backward_windows", "argmax", "backward_indexed")
_X = "const T* __restrict__ x"


def render_pool(kernel: str, kind: str, dtype, *, wide: bool = False, vec: int = 1) -> CudaSource:
    """The CUDA C of one pooling kernel of KERNELS, kind "max" or "avg" ("argmax" and
    "backward_indexed": max only): "backward" is the gather, "backward_windows" writes each window's
    cells (windows must not overlap), "argmax" writes each window's argmax as a byte that
    "backward_indexed" reads. wide: 64-bit indices (an array of 2**31 elements or more); vec: the
    channels each thread owns (they must divide C, and every array be aligned to vec elements)."""
    if kernel not in KERNELS or (kernel in ("argmax", "backward_indexed") and kind != "max"):
        raise ValueError(f"no {kind} pooling kernel {kernel!r}")
    dtype = np.dtype(dtype)
    storage, acc, load, store = _TYPES[dtype]
    name = f"lt_{kind}_pool2d_{kernel}_{dtype.name}{'_i64' if wide else ''}{f'_v{vec}' if vec > 1 else ''}"
    head = _HEAD.format(include=_INCLUDES.get(dtype, ""), storage=storage,
                        acc=acc, load=load, store=store, index="long long" if wide else "int", vec=vec)
    if kernel == "backward_windows":
        if kind == "max":
            body = _BACKWARD_WINDOWS.format(
                name=name, thread=_THREAD, scale="",
                find="int where[VEC];\n    window_argmax(x, n, p, q, c, where, SHAPE_ARGS);",
                cell="h * W + w == where[k] ? share[k] : (A)0")
        else:
            body = _BACKWARD_WINDOWS.format(name=name, thread=_THREAD, scale=" / (A)(KH * KW)", find="",
                                            cell="share[k]")
    elif kernel == "forward":
        if kind == "max":
            body = _FORWARD.format(name=name, thread=_THREAD, init="(A)LT_NEG_INF", result="acc[k]",
                                   update="if (a > acc[k] || isnan(a)) acc[k] = a;")
        else:
            body = _FORWARD.format(name=name, thread=_THREAD, init="0", result="acc[k] / (A)(KH * KW)",
                                   update="acc[k] += a;")
    elif kernel == "argmax":
        body = _ARGMAX.format(name=name, thread=_THREAD)
    elif kernel == "backward_indexed":
        body = _BACKWARD.format(name=name, thread=_THREAD, first="const unsigned char* __restrict__ arg",
                                take=_INDEXED_TAKE, scale="")
    else:
        body = _BACKWARD.format(name=name, thread=_THREAD, first=_X, take=_MAX_TAKE if kind == "max" else _AVG_TAKE,
                                scale="" if kind == "max" else " / (A)(KH * KW)")
    return CudaSource(name, head + body, dtype == np.float16, body, dtype == BFLOAT16)


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


def vector_width(dtype, channels: int, arrays=()) -> int:
    """The channels each thread owns: as many as one 16-byte load carries, halved until they divide
    `channels` and every array's address is aligned to that many of its elements."""
    vec = 16 // np.dtype(dtype).itemsize
    while vec > 1 and (channels % vec or any(a.data.ptr % (vec * a.itemsize) for a in arrays)):
        vec //= 2
    return vec


def _launch(compiler, kernel, kind, arrays, count, shape_args):
    """One kernel over `count` elements (windows or cells), VEC channels per thread."""
    dtype = next(a.dtype for a in arrays if is_float(a.dtype))
    vec = vector_width(dtype, shape_args[3], arrays)
    source = render_pool(kernel, kind, dtype, wide=max(a.size for a in arrays) >= 2**31, vec=vec)
    function = _function(compiler, source, arrays[-1].device.id)
    total = count // vec
    grid = ((total + _BLOCK - 1) // _BLOCK,)
    function(grid, (_BLOCK,), (*arrays, np.int64(total), *[np.int32(v) for v in shape_args]))


def _shape_args(in_shape, out_shape, kernel, stride, padding) -> tuple:
    n, h, w, c = in_shape
    return (n, h, w, c, out_shape[1], out_shape[2], *kernel, *stride, *padding)


def pool_forward(compiler, kind: str, x, kernel, stride, padding, out) -> None:
    """x, out: C-contiguous cupy arrays of one float dtype."""
    if out.size == 0:
        return
    _launch(compiler, "forward", kind, (x, out), out.size, _shape_args(x.shape, out.shape, kernel, stride, padding))


def windows_apart(kernel, stride) -> bool:
    """Whether no two windows share a cell (the backward then writes per window)."""
    return stride[0] >= kernel[0] and stride[1] >= kernel[1]


def windows_cover(in_shape, out_shape, kernel, stride, padding) -> bool:
    """Whether windows that do not overlap hold every cell of the input: no gaps between them, and
    the last window reaching the last row and column."""
    return all(s == k and (o - 1) * s - pad + k >= size
               for size, o, k, s, pad in zip(in_shape[1:3], out_shape[1:3], kernel, stride, padding))


def backward_kernels(kind: str, in_shape, out_shape, kernel, stride, padding) -> tuple:
    """The kernels of a pooling's backward, in launch order (see the module's docstring)."""
    if windows_apart(kernel, stride):
        return ("backward_windows",)
    if kind == "max" and kernel[0] * kernel[1] <= 255:      # the argmax's place fits a byte
        return ("argmax", "backward_indexed")
    return ("backward",)


def pool_backward(compiler, kind: str, x, g, kernel, stride, padding, out, argmax=None) -> None:
    """x (max pooling only; else any array of out's dtype), g, out: C-contiguous cupy arrays;
    argmax: a uint8 array of g's size, the argmax kernel's output, where backward_kernels names it."""
    if out.size == 0:
        return
    shape_args = _shape_args(out.shape, g.shape, kernel, stride, padding)
    kernels = backward_kernels(kind, out.shape, g.shape, kernel, stride, padding)
    if kernels == ("backward_windows",):
        if not windows_cover(out.shape, g.shape, kernel, stride, padding):
            out.fill(0)
        if g.size:
            _launch(compiler, "backward_windows", kind, (x, g, out), g.size, shape_args)
    elif kernels == ("argmax", "backward_indexed"):
        if g.size:
            _launch(compiler, "argmax", kind, (x, argmax), g.size, shape_args)
        _launch(compiler, "backward_indexed", kind, (argmax, g, out), out.size, shape_args)
    else:
        _launch(compiler, "backward", kind, (x, g, out), out.size, shape_args)
