"""The "lazytensor" array backend of Dask (the `dask.array.backends` entry point): with
`dask.config.set({"array.backend": "lazytensor"})`, da.ones, da.zeros, da.empty, da.full,
da.arange, da.random and `x.to_backend("lazytensor")` make lazytensor chunks, on
lt.default_device().

Design: docs/design/dask.md
"""
from __future__ import annotations

import dask.array as da
from dask import config
from dask.array.backends import ArrayBackendEntrypoint
from dask.utils import Dispatch

from lazytensor.core.tensor import asarray, empty
from lazytensor.kernels.backend import default_device
from lazytensor.core.operand import Operand
from lazytensor.dask_backend import random
from lazytensor.dask_backend.hooks import register

to_lazytensor_dispatch = Dispatch("to_lazytensor_dispatch")


@to_lazytensor_dispatch.register(object)
def _to_lazytensor(data, **kwargs):
    return asarray(data, **kwargs)


def _meta():
    return empty((0,), device=default_device())


def _with_meta(name, *args, meta=None, **kwargs):
    # Dask's own creation function, with a lazytensor chunk as the meta, under the NumPy backend
    # (which makes each chunk with the meta's array library: np.ones_like -> lt.ones_like)
    with config.set({"array.backend": "numpy"}):
        return getattr(da, name)(*args, meta=_meta() if meta is None else meta, **kwargs)


class LazytensorBackendEntrypoint(ArrayBackendEntrypoint):
    def __init__(self):
        register()

    @classmethod
    def to_backend_dispatch(cls):
        return to_lazytensor_dispatch

    @classmethod
    def to_backend(cls, data, **kwargs):
        if isinstance(data._meta, Operand):
            return data
        return data.map_blocks(to_lazytensor_dispatch, **kwargs)

    @property
    def RandomState(self):
        return random.RandomState

    @property
    def default_bit_generator(self):
        return random.PCG64

    @staticmethod
    def ones(*args, **kwargs):
        return _with_meta("ones", *args, **kwargs)

    @staticmethod
    def zeros(*args, **kwargs):
        return _with_meta("zeros", *args, **kwargs)

    @staticmethod
    def empty(*args, **kwargs):
        return _with_meta("empty", *args, **kwargs)

    @staticmethod
    def full(*args, **kwargs):
        return _with_meta("full", *args, **kwargs)

    @staticmethod
    def arange(*args, like=None, **kwargs):
        with config.set({"array.backend": "numpy"}):
            return da.arange(*args, like=_meta() if like is None else like, **kwargs)


