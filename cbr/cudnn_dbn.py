"""drelu + dBN as one cuDNN frontend graph (the CBR backward's stage 1 on cuDNN).

Design: docs/design/cbr-backward.md, section "cbr/cudnn_dbn.py".
"""

from __future__ import annotations

import numpy as np

from .conv_key import ConvKey
from .cudnn_cache import CompiledConvGraph, ConvGraphCache, default_cache
from .cudnn_graphs import GraphKind
from .cudnn_handle import import_cuda_modules


def dbn_key(out_shape, dtype="float16") -> ConvKey:
    """The key of the dBN graph over an (N, P, Q, K) activation: that of the 1x1 conv giving it."""
    n, p, q, k = (int(d) for d in out_shape)
    return ConvKey.of((n, p, q, k), (k, 1, 1, k), dtype, 1, 0, 1)


def dbn_relu(dy, mask, y, gamma, mean, inv_var, *, dx, dgamma, dbeta, cache: ConvGraphCache | None = None):
    """Enqueue the dbn_relu graph on CuPy's current stream: dx (y's dtype), dgamma and dbeta
    (float32 (K,)) from dy, the packed mask (uint8, ceil(N*P*Q*K / 8) bytes), y and the statistics."""
    cupy, _ = import_cuda_modules()
    key = dbn_key(y.shape, y.dtype)
    k = key.k
    act = y.dtype
    for name, a, dtype, shape in (("dy", dy, act, y.shape), ("y", y, act, y.shape),
                                  ("dx", dx, act, y.shape), ("mask", mask, np.uint8, ((y.size + 7) // 8,)),
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


def compiled_dbn_graph_for(out_shape, device_id=0, cache=None, dtype="float16") -> CompiledConvGraph | None:
    """The dbn_relu graph a call over this shape ran, or None (never builds)."""
    return (cache if cache is not None else default_cache()).entry(GraphKind.DBN_RELU, dbn_key(out_shape, dtype),
                                                                    device_id)
