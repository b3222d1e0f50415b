"""Tensors and expressions in dask.distributed's serialization families. "dask": a tensor travels as
its array under distributed's own serializer for it (NumPy's frames, out of band; a CUDA tensor's
CuPy array through the host, or a host copy where distributed has no CuPy serializer); "cuda": a
CUDA tensor's memory as device frames (distributed's CuPy serializer, as dask-cuda's UCX comms
send them), a CPU tensor left to the next family. An expression is evaluated first, as when it
pickles: what travels is a value. Each unpacks as a Tensor on its device.

Design: docs/design/dask.md
"""
from __future__ import annotations

import sys

from lazytensor.assign.evaluate import result_of
from lazytensor.core.expr import Expr
from lazytensor.core.tensor import Tensor, asarray

_registered = []


def _wrap(array, device: str) -> Tensor:
    if device == "cpu":
        return Tensor(array, "cpu")
    return asarray(array, device=device)     # a CuPy array is taken as is; host memory is copied over


def dask_dumps(x):
    from distributed.protocol.serialize import dask_dumps as dumps_array
    t = result_of(x)
    try:
        header, frames = dumps_array(t.data)
    except NotImplementedError:                 # no serializer for the device's array: a host copy
        header, frames = dumps_array(t.backend.to_host(t.data))
    return {"device": t.device, "array": header}, frames


def dask_loads(header, frames):
    from distributed.protocol.serialize import dask_loads as loads_array
    return _wrap(loads_array(header["array"], frames), header["device"])


def cuda_dumps(x):
    from distributed.protocol.cuda import cuda_dumps as dumps_array
    t = result_of(x) if type(x) is Expr else x
    if t.device == "cpu":
        raise NotImplementedError("a CPU tensor travels in the dask family")   # serialize() tries the next
    header, frames = dumps_array(t.data)        # NotImplementedError without distributed's CuPy module
    return {"device": t.device, "array": header}, frames


def cuda_loads(header, frames):
    from distributed.protocol.cuda import cuda_loads as loads_array
    return _wrap(loads_array(header["array"], frames), header["device"])


def register() -> None:
    """Register Tensor and Expr with distributed's "dask" and "cuda" families; once per process."""
    if _registered:
        return
    from distributed.protocol.cuda import cuda_deserialize, cuda_serialize
    from distributed.protocol.serialize import dask_deserialize, dask_serialize
    for cls in (Tensor, Expr):
        dask_serialize.register(cls)(dask_dumps)
        dask_deserialize.register(cls)(dask_loads)
        cuda_serialize.register(cls)(cuda_dumps)
        cuda_deserialize.register(cls)(cuda_loads)
    _registered.append(True)


def register_where_distributed_is_loaded() -> None:
    """register() in a process that has imported dask.distributed (a worker, a client), else nothing:
    lazytensor never imports distributed itself."""
    if not _registered and "distributed.protocol.serialize" in sys.modules:
        register()
