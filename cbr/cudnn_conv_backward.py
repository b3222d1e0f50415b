"""The backward convolutions as functions of CuPy arrays, through cuDNN frontend graphs:

    conv2d_dgrad(dy, w, x_shape, ...)  -> dx   the gradient reaching x: (N, H, W, C)
    conv2d_wgrad(x, dy, w_shape, ...)  -> dw   the gradient reaching w: (K, R, S, C)

NHWC / KRSC operands of one dtype (accumulation in float32 inside the graph, float64 for float64;
float32 on TF32 engines where `tf32`, default lt.config.conv_allow_tf32), results in that dtype.
The graphs are cached per (kind, forward conv shape, device) with the forward ones
(cudnn_cache.default_cache()), so a shape pays for its graph and plan choice once. Everything is
enqueued on CuPy's current stream of the operands' device; nothing waits for the GPU. cuDNN refusing
a graph raises CudnnGraphRejected (the planner then runs the call on the host and explain says why).
"""

from __future__ import annotations

import numpy as np

from .conv_key import ConvKey
from .cudnn_cache import CompiledConvGraph, ConvGraphCache, default_cache
from .cudnn_conv import allow_tf32, contiguous, conv_key, output_array
from .cudnn_dtypes import CONV_DTYPES
from .cudnn_graphs import GraphKind
from .cudnn_handle import import_cuda_modules


def conv2d_dgrad(dy, w, x_shape, stride=1, padding=0, dilation=1, *, out=None, cache: ConvGraphCache | None = None,
                 tf32=None):
    """dx of shape x_shape: the gradient of sum(conv2d(x, w) * dy) with respect to x."""
    cupy, key, device_id = _checked(("dy", dy), ("w", w), tuple(x_shape), tuple(w.shape), stride, padding, dilation,
                                    tf32)
    _check_dy(dy, key)
    with cupy.cuda.Device(device_id):
        dy, w = contiguous(cupy, dy), contiguous(cupy, w)
        dx = output_array(cupy, out, key.x_shape, dy.dtype, device_id, "out")
        pointers = {"dy": dy.data.ptr, "w": w.data.ptr, "dx": dx.data.ptr}
        compiled = (cache if cache is not None else default_cache()).get(GraphKind.CONV_DGRAD, key, device_id, pointers)
        compiled.launch(pointers)
    return dx


def conv2d_wgrad(x, dy, w_shape, stride=1, padding=0, dilation=1, *, out=None, cache: ConvGraphCache | None = None,
                 tf32=None):
    """dw of shape w_shape, in x's dtype: the gradient of sum(conv2d(x, w) * dy) with respect to w."""
    cupy, key, device_id = _checked(("x", x), ("dy", dy), tuple(x.shape), tuple(w_shape), stride, padding, dilation,
                                    tf32)
    _check_dy(dy, key)
    with cupy.cuda.Device(device_id):
        x, dy = contiguous(cupy, x), contiguous(cupy, dy)
        dw = output_array(cupy, out, key.w_shape, x.dtype, device_id, "out")
        pointers = {"x": x.data.ptr, "dy": dy.data.ptr, "dw": dw.data.ptr}
        compiled = (cache if cache is not None else default_cache()).get(GraphKind.CONV_WGRAD, key, device_id, pointers)
        compiled.launch(pointers)
    return dw


def compiled_backward_graph_for(kind, x_shape, w_shape, stride=1, padding=0, dilation=1, device_id=0,
                                cache=None, dtype="float16", tf32=None) -> CompiledConvGraph | None:
    """The conv_dgrad or conv_wgrad graph a call with these forward shapes ran, or None (never builds)."""
    key = ConvKey.of(x_shape, w_shape, dtype, stride, padding, dilation, allow_tf32(tf32))
    return (cache if cache is not None else default_cache()).entry(GraphKind(kind), key, device_id)


def _checked(first, second, x_shape, w_shape, stride, padding, dilation, tf32=None):
    """(cupy, key, device id) for two CuPy operands of one conv dtype on one device, or a TypeError/ValueError."""
    cupy, _ = import_cuda_modules()
    for name, a in (first, second):
        if not isinstance(a, cupy.ndarray):
            raise TypeError(
                f"{name} must be a CuPy array on the GPU for the cuDNN path; got {type(a).__module__}.{type(a).__name__}"
            )
        if np.dtype(a.dtype).name not in CONV_DTYPES or a.dtype != first[1].dtype:
            raise TypeError(f"the cuDNN backward conv graphs take operands of one dtype among "
                            f"{', '.join(sorted(CONV_DTYPES))}; {first[0]} is {first[1].dtype}, {name} is {a.dtype} "
                            "(cast with .astype(cupy.float32))")
    key = conv_key(x_shape, w_shape, stride, padding, dilation, first[1].dtype, allow_tf32(tf32))
    device_id = first[1].device.id
    if second[1].device.id != device_id:
        raise ValueError(f"{first[0]} is on device {device_id} but {second[0]} is on device {second[1].device.id}; "
                         "move one of them")
    return cupy, key, device_id


def _check_dy(dy, key: ConvKey):
    if tuple(dy.shape) != key.out_shape:
        raise ValueError(f"dy has shape {tuple(dy.shape)} but the conv of x {key.x_shape} by w {key.w_shape} "
                         f"(stride {key.stride}, padding {key.padding}, dilation {key.dilation}) has output "
                         f"shape {key.out_shape}; dy must be the gradient of that output")
