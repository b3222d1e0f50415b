"""drelu + dBN as one cuDNN frontend graph (the CBR backward's stage 1 on cuDNN):

    dym = dy * mask                     g.scale with the mask declared BOOLEAN
    dx, dgamma, dbeta = batchnorm_backward(dym, y, gamma, mean, inv_var)

dy, y (the conv output) and dx are float16 NHWC (N, P, Q, K); mask is the forward's 1-bit ReLU mask:
cuDNN's BOOLEAN is bit-packed exactly as lazytensor saves it (np.packbits over the NHWC-flattened
elements, bitorder="little"; measured on the H200, ../shared/gpu/README.md), so the saved bytes
are passed as they are. gamma, mean, inv_var, dgamma, dbeta: float32 (K,). dy * mask never leaves
the graph. The graph depends on the output shape alone; it is cached and planned like the conv
graphs under the key of the 1x1 conv whose output has that shape (dbn_key), so the experience
tables and the tuner (python -m lazytensor.cbr.tune --kinds dbn_relu) serve it unchanged.
"""

from __future__ import annotations

import numpy as np

from .conv_key import ConvKey
from .cudnn_cache import CompiledConvGraph, ConvGraphCache, default_cache
from .cudnn_errors import CudnnGraphRejected
from .cudnn_graphs import GRAPH_ROLES, ConvGraph, GraphKind, nchw_dims_nhwc_strides
from .cudnn_handle import import_cuda_modules


def dbn_key(out_shape) -> ConvKey:
    """The key of the dBN graph over an (N, P, Q, K) activation: that of the 1x1 conv giving it."""
    n, p, q, k = (int(d) for d in out_shape)
    return ConvKey.of((n, p, q, k), (k, 1, 1, k), "float16", 1, 0, 1)


def build_dbn_graph(key: ConvKey, handle) -> ConvGraph:
    """The dbn_relu graph over key.out_shape; CudnnGraphRejected if cuDNN will not take it."""
    kind = GraphKind.DBN_RELU
    _, cudnn = import_cuda_modules()
    if key.dtype != "float16":
        raise CudnnGraphRejected(kind.value, key, f"the cuDNN dBN graph takes float16 activations; got {key.dtype}")
    half, f32 = cudnn.data_type.HALF, cudnn.data_type.FLOAT
    n, p, q, k = key.out_shape
    try:
        g = cudnn.pygraph(name="lazytensor_dbn_relu", io_data_type=half, intermediate_data_type=f32,
                          compute_data_type=f32, handle=handle)
        y_dims, y_strides = nchw_dims_nhwc_strides(n, k, p, q)
        vec_dims, vec_strides = nchw_dims_nhwc_strides(1, k, 1, 1)
        dy = g.tensor(name="dy", dim=y_dims, stride=y_strides, data_type=half)
        mask = g.tensor(name="mask", dim=y_dims, stride=y_strides, data_type=cudnn.data_type.BOOLEAN)
        y = g.tensor(name="y", dim=y_dims, stride=y_strides, data_type=half)
        gamma, mean, inv_var = (g.tensor(name=name, dim=vec_dims, stride=vec_strides, data_type=f32)
                                for name in ("gamma", "mean", "inv_var"))
        dym = g.scale(input=dy, scale=mask, compute_data_type=f32, name="drelu")
        dx, dgamma, dbeta = g.batchnorm_backward(grad=dym, input=y, scale=gamma, mean=mean, inv_variance=inv_var,
                                                 name="dbn")
        dx.set_output(True).set_data_type(half).set_dim(y_dims).set_stride(y_strides)
        for t in (dgamma, dbeta):
            t.set_output(True).set_data_type(f32).set_dim(vec_dims).set_stride(vec_strides)
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
    except cudnn.cudnnGraphNotSupportedError as e:
        raise CudnnGraphRejected(kind.value, key, str(e).strip() or type(e).__name__) from e
    except (RuntimeError, ValueError, TypeError, AttributeError) as e:   # as build_conv_graph: the caller falls back
        raise CudnnGraphRejected(kind.value, key, f"{type(e).__name__}: {str(e).strip()}") from e
    tensors = {"dy": dy, "mask": mask, "y": y, "gamma": gamma, "mean": mean, "inv_var": inv_var,
               "dx": dx, "dgamma": dgamma, "dbeta": dbeta}
    uids = {role: int(tensors[role].get_uid()) for role in GRAPH_ROLES[kind]}
    return ConvGraph(kind, key, g, uids, handle)


def dbn_relu(dy, mask, y, gamma, mean, inv_var, *, dx, dgamma, dbeta, cache: ConvGraphCache | None = None):
    """Enqueue the dbn_relu graph on CuPy's current stream: dx (float16, like y), dgamma and dbeta
    (float32 (K,)) from dy, the packed mask (uint8, ceil(N*P*Q*K / 8) bytes), y and the statistics."""
    cupy, _ = import_cuda_modules()
    key = dbn_key(y.shape)
    k = key.k
    for name, a, dtype, shape in (("dy", dy, np.float16, y.shape), ("y", y, np.float16, y.shape),
                                  ("dx", dx, np.float16, y.shape), ("mask", mask, np.uint8, ((y.size + 7) // 8,)),
                                  ("gamma", gamma, np.float32, (k,)), ("mean", mean, np.float32, (k,)),
                                  ("inv_var", inv_var, np.float32, (k,)), ("dgamma", dgamma, np.float32, (k,)),
                                  ("dbeta", dbeta, np.float32, (k,))):
        if not isinstance(a, cupy.ndarray) or a.dtype != dtype or tuple(a.shape) != tuple(shape) \
                or not a.flags.c_contiguous:
            got = f"{type(a).__name__} {getattr(a, 'dtype', '')} {getattr(a, 'shape', '')}".strip()
            raise ValueError(f"dbn_relu: {name} must be a dense {np.dtype(dtype).name} CuPy array of shape "
                             f"{tuple(shape)}; got {got}")
    device_id = y.device.id
    pointers = {"dy": dy.data.ptr, "mask": mask.data.ptr, "y": y.data.ptr, "gamma": gamma.data.ptr,
                "mean": mean.data.ptr, "inv_var": inv_var.data.ptr, "dx": dx.data.ptr, "dgamma": dgamma.data.ptr,
                "dbeta": dbeta.data.ptr}
    with cupy.cuda.Device(device_id):
        compiled = (cache if cache is not None else default_cache()).get(GraphKind.DBN_RELU, key, device_id, pointers)
        compiled.launch(pointers)


def compiled_dbn_graph_for(out_shape, device_id=0, cache=None) -> CompiledConvGraph | None:
    """The dbn_relu graph a call over this shape ran, or None (never builds)."""
    return (cache if cache is not None else default_cache()).entry(GraphKind.DBN_RELU, dbn_key(out_shape), device_id)
