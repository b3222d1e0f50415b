"""The CBR graphs as functions of CuPy arrays: what the planner's CUDA steps call.

    conv2d(x, w, ...)                                   -> y
    conv2d_genstats(x, w, ...)                          -> y, sum, sum_sq     (training stage 1)
    conv2d_scale_bias_relu(x, w, eq_scale, eq_bias, ...) -> y                 (inference, BN folded)

x (N, H, W, C), w (K, R, S, C) and y (N, P, Q, K) of one dtype (cudnn_dtypes.GRAPH_DTYPES says
which graph takes which; float32 runs TF32 engines where `tf32`, default lt.config.conv_allow_tf32);
sum, sum_sq, eq_scale and eq_bias: float32 (K,). Everything is enqueued on CuPy's current stream of
x's device; nothing waits for the GPU. Outputs are allocated from CuPy's pool unless passed in
(`out=`, ...). cuDNN refusing a graph raises CudnnGraphRejected (the planner's step then raises
UnsupportedOnDevice, or falls back where it has a fallback; explain says why).
"""

from __future__ import annotations

import functools

import numpy as np

from lazytensor.kernels.config import config

from .conv_key import ConvKey
from .cudnn_cache import CompiledConvGraph, ConvGraphCache, default_cache
from .cudnn_graphs import GraphKind
from .cudnn_handle import import_cuda_modules
from .cudnn_dtypes import CONV_DTYPES
from .cudnn_support import cudnn_dtype_refusal


def conv2d(x, w, stride=1, padding=0, dilation=1, *, out=None, cache: ConvGraphCache | None = None, tf32=None):
    cupy, key, device_id = checked_operands(x, w, stride, padding, dilation, tf32)
    with cupy.cuda.Device(device_id):
        x, w = contiguous(cupy, x), contiguous(cupy, w)
        y = output_array(cupy, out, key.out_shape, x.dtype, device_id, "out")
        pointers = {"x": x.data.ptr, "w": w.data.ptr, "y": y.data.ptr}
        compiled = (cache if cache is not None else default_cache()).get(GraphKind.CONV, key, device_id, pointers)
        compiled.launch(pointers)
    return y


def conv2d_genstats(
    x, w, stride=1, padding=0, dilation=1, *, out=None, sum_out=None, sum_sq_out=None, cache: ConvGraphCache | None = None,
    tf32=None,
):
    """y = conv(x, w) and the float32 per-channel sum and sum of squares of y, from one cuDNN graph.

    cuDNN's genstats writes the sums (it does not add to what the buffers hold: measured on cuDNN
    9.19, recorded by the tuner as genstats_outputs), so they need no zeroing first.
    """
    cupy, key, device_id = checked_operands(x, w, stride, padding, dilation, tf32)
    k = key.k
    with cupy.cuda.Device(device_id):
        x, w = contiguous(cupy, x), contiguous(cupy, w)
        y = output_array(cupy, out, key.out_shape, x.dtype, device_id, "out")
        total = output_array(cupy, sum_out, (k,), np.float32, device_id, "sum_out")
        total_sq = output_array(cupy, sum_sq_out, (k,), np.float32, device_id, "sum_sq_out")
        pointers = {"x": x.data.ptr, "w": w.data.ptr, "y": y.data.ptr, "sum": total.data.ptr, "sum_sq": total_sq.data.ptr}
        compiled = (cache if cache is not None else default_cache()).get(GraphKind.CONV_GENSTATS, key, device_id, pointers)
        compiled.launch(pointers)
    return y, total, total_sq


def conv2d_scale_bias_relu(
    x, w, eq_scale, eq_bias, stride=1, padding=0, dilation=1, *, out=None, cache: ConvGraphCache | None = None,
    tf32=None,
):
    """y = relu(conv(x, w) * eq_scale + eq_bias), per output channel, in one cuDNN graph."""
    cupy, key, device_id = checked_operands(x, w, stride, padding, dilation, tf32)
    with cupy.cuda.Device(device_id):
        x, w = contiguous(cupy, x), contiguous(cupy, w)
        scale = checked_vector(cupy, eq_scale, key.k, device_id, "eq_scale")
        bias = checked_vector(cupy, eq_bias, key.k, device_id, "eq_bias")
        y = output_array(cupy, out, key.out_shape, x.dtype, device_id, "out")
        pointers = {"x": x.data.ptr, "w": w.data.ptr, "eq_scale": scale.data.ptr, "eq_bias": bias.data.ptr, "y": y.data.ptr}
        compiled = (cache if cache is not None else default_cache()).get(GraphKind.CONV_SCALE_BIAS_RELU, key, device_id, pointers)
        compiled.launch(pointers)
    return y


def compiled_graph_for(kind, x_shape, w_shape, stride=1, padding=0, dilation=1, device_id=0, cache=None,
                       dtype="float16", tf32=None) -> CompiledConvGraph | None:
    """The graph a call with these shapes ran (for explain: plan name, source, candidate times), or None."""
    key = ConvKey.of(x_shape, w_shape, dtype, stride, padding, dilation, allow_tf32(tf32))
    return (cache if cache is not None else default_cache()).entry(GraphKind(kind), key, device_id)


# ---- argument checks (on every call: kept to attribute reads and one cached key) ---------------


def allow_tf32(tf32) -> bool:
    """A call's tf32 argument: None reads lt.config.conv_allow_tf32."""
    return config.conv_allow_tf32 if tf32 is None else bool(tf32)


def checked_operands(x, w, stride, padding, dilation, tf32=None):
    """(cupy, key, device id) for CuPy x and w of one conv dtype on one device, or a TypeError/ValueError."""
    cupy, _ = import_cuda_modules()
    for name, a in (("x", x), ("w", w)):
        if not isinstance(a, cupy.ndarray):
            raise TypeError(
                f"{name} must be a CuPy array on the GPU for the cuDNN path; got {type(a).__module__}.{type(a).__name__}"
            )
    why = cudnn_dtype_refusal(x.dtype)
    if x.dtype != w.dtype or why is not None:
        raise TypeError(
            f"the cuDNN conv graphs take x and w of one dtype among {', '.join(sorted(CONV_DTYPES))}; got x {x.dtype}, "
            f"w {w.dtype} (cast with .astype(cupy.float32))"
        )
    key = conv_key(x.shape, w.shape, stride, padding, dilation, x.dtype, allow_tf32(tf32))
    device_id = x.device.id
    if w.device.id != device_id:
        raise ValueError(f"x is on device {device_id} but w is on device {w.device.id}; move one of them")
    return cupy, key, device_id


def conv_key(x_shape, w_shape, stride, padding, dilation, dtype="float16", tf32=False) -> ConvKey:
    """ConvKey.of, remembered: the checks run once per distinct call signature."""
    dtype = np.dtype(dtype)
    try:
        return cached_conv_key(x_shape, w_shape, stride, padding, dilation, dtype, tf32)
    except TypeError as e:
        if "unhashable" not in str(e):
            raise
        return ConvKey.of(x_shape, w_shape, dtype, stride, padding, dilation, tf32)  # list arguments


@functools.lru_cache(maxsize=1024)
def cached_conv_key(x_shape, w_shape, stride, padding, dilation, dtype, tf32) -> ConvKey:
    return ConvKey.of(x_shape, w_shape, dtype, stride, padding, dilation, tf32)


def contiguous(cupy, a):
    # The planner hands over contiguous arrays; a strided view is copied so cuDNN reads it as dense NHWC.
    return a if a.flags.c_contiguous else cupy.ascontiguousarray(a)


def checked_vector(cupy, v, k: int, device_id: int, name: str):
    if not isinstance(v, cupy.ndarray) or v.dtype != np.float32 or v.shape != (k,):
        got = f"{type(v).__name__} {getattr(v, 'dtype', '')} {getattr(v, 'shape', '')}".strip()
        raise TypeError(f"{name} must be a float32 CuPy vector of shape ({k},), one value per output channel; got {got}")
    if v.device.id != device_id:
        raise ValueError(f"{name} is on device {v.device.id} but x is on device {device_id}")
    return contiguous(cupy, v)


def output_array(cupy, given, shape, dtype, device_id: int, name: str):
    if given is None:
        return cupy.empty(shape, dtype=dtype)
    if not isinstance(given, cupy.ndarray) or given.shape != tuple(shape) or given.dtype != dtype:
        got = f"{type(given).__name__} {getattr(given, 'dtype', '')} {getattr(given, 'shape', '')}".strip()
        raise ValueError(f"{name} must be a {np.dtype(dtype).name} CuPy array of shape {tuple(shape)}; got {got}")
    if not given.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (cuDNN writes it as a dense NHWC tensor)")
    if given.device.id != device_id:
        raise ValueError(f"{name} is on device {given.device.id} but x is on device {device_id}")
    return given
