"""lazytensor's chunk type in the dispatch tables Dask keeps (dask.array.dispatch): concatenate,
take, tensordot, empty, divide, percentile, numel, nannumel, to_numpy, to_cupy. Each builds lazy
nodes except percentile, which runs NumPy's on a host copy of the chunk, as Dask merges them.

Design: docs/design/dask.md
"""
from __future__ import annotations

import math

import numpy as np
from dask.array import dispatch as d

from lazytensor.core.operand import Operand
from lazytensor.core.tensor import asarray, empty as lt_empty, full
from lazytensor.ops.elementwise import isnan
from lazytensor.ops.indexing import take
from lazytensor.ops.joining import concatenate
from lazytensor.ops.products import tensordot
from lazytensor.ops.reductions import sum as lt_sum


def divide(x1, x2, out=None, dtype=None):
    if out is not None:
        raise TypeError("lazytensor's divide for Dask takes no out=")
    q = x1 / x2
    return q if dtype is None or q.dtype == np.dtype(dtype) else q.astype(dtype)


def percentile(a, q, method="linear"):
    from dask.array.percentile import _percentile
    return _percentile(np.asarray(a), np.asarray(q), method)


def numel(x, axis=None, keepdims=False, dtype=np.float64, **kwargs):
    """The count of elements a reduction over `axis` sees, shaped as its result: a NumPy array for
    CPU chunks, as for NumPy chunks (Dask's var writes into the counts it sums); a tensor on CUDA."""
    axes = range(x.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
    axes = {a % x.ndim for a in axes} if x.ndim else set()
    count = math.prod(x.shape[a] for a in axes)
    shape = tuple(1 if a in axes else n for a, n in enumerate(x.shape)) if keepdims else \
        tuple(n for a, n in enumerate(x.shape) if a not in axes)
    if x.device != "cpu":
        return full(shape, count, dtype=dtype, device=x.device)
    return np.full(shape, count, dtype=dtype)


def nannumel(x, **kwargs):
    return lt_sum(~isnan(x), **kwargs)


def empty(shape, dtype=None, **kwargs):
    return lt_empty(shape, dtype=dtype)


def to_numpy(x, **kwargs):
    return np.asarray(x, **kwargs)


def to_cupy(x, **kwargs):
    import cupy
    return cupy.asarray(asarray(x, device="cuda").data, **kwargs)


def register() -> None:
    d.concatenate_lookup.register(Operand, concatenate)
    d.take_lookup.register(Operand, take)
    d.tensordot_lookup.register(Operand, tensordot)
    d.empty_lookup.register(Operand, empty)
    d.divide_lookup.register(Operand, divide)
    d.percentile_lookup.register(Operand, percentile)
    d.numel_lookup.register(Operand, numel)
    d.nannumel_lookup.register(Operand, nannumel)
    d.to_numpy_dispatch.register(Operand, to_numpy)
    d.to_cupy_dispatch.register(Operand, to_cupy)
