"""What lazytensor's classes tell Dask without importing it: a token (`__dask_tokenize__`), whose
first call registers lazytensor with Dask (register()).

Design: docs/design/dask.md
"""
from __future__ import annotations

import uuid

_registered = []


def register() -> None:
    """Put lazytensor's chunk type in Dask's dispatch tables and install the graph pass that
    evaluates each task's result (lazytensor.dask_backend.tasks), and, where dask.distributed is
    imported, tensors in its serialization families (lazytensor.dask_backend.serialize); once per
    process. Called by the
    entry point and by the first tensor Dask tokenizes (da.from_array(t)); call it yourself where
    tensors enter Dask otherwise (a map_blocks that returns them)."""
    from lazytensor.dask_backend.serialize import register_where_distributed_is_loaded
    register_where_distributed_is_loaded()
    if _registered:
        return
    from lazytensor.dask_backend import dispatch, tasks
    dispatch.register()
    tasks.install()
    _registered.append(True)


def tokenize(self):
    """Dask's token of a tensor or an expression: its values' (a CPU tensor's hash, as Dask hashes a
    NumPy array), else the identity of its memory and the count of writes to it."""
    register()
    from dask.base import normalize_token
    from lazytensor.core.readers import memory_of
    from lazytensor.core.tensor import Tensor
    if type(self) is not Tensor:
        if getattr(self, "result", None) is not None:
            return tokenize(self.result)
        return ("lazytensor.Expr", uuid.uuid4().hex)    # (not hashed: hashing it would evaluate it)
    if self.device == "cpu":
        return ("lazytensor.Tensor", normalize_token(self.data))
    data = self.data
    return ("lazytensor.Tensor", self.device, data.data.ptr, data.shape, data.strides, str(data.dtype),
            memory_of(self).version)
