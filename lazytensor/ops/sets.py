"""The Array API's set functions, np.unique_all, unique_counts, unique_inverse, unique_values: the
distinct elements of x, sorted, with where each first occurs, where each element went and how
often each occurs. The result sizes come from the data, so x is evaluated and the device's array
library (NumPy or CuPy) does the work: on CUDA, a host sync for the sizes.

NaNs are distinct from each other (each NaN is its own value, as the standard and NumPy 2's
unique_* say). Indices and counts are int64; inverse_indices has x's shape."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from lazytensor.core.tensor import Tensor
from lazytensor.ops.device_arrays import array_module, evaluated

UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def _unique(x, index=False, inverse=False, counts=False):
    t = evaluated(x)
    xp = array_module(t.device)
    flat = t.data.reshape(-1)
    # A stable sort (CuPy's is always) keeps equal elements in their order, so the first of each run
    # is where that value first occurs; NaNs sort last on both libraries.
    order = xp.argsort(flat, kind="stable")
    ordered = flat[order]
    starts = xp.ones(flat.shape, dtype=bool)
    if flat.size > 1:
        # A new value starts where it differs from the one before; NaN != NaN makes every NaN one.
        starts[1:] = ordered[1:] != ordered[:-1]
    begin = xp.flatnonzero(starts)
    out = {"values": Tensor(xp.ascontiguousarray(ordered[begin]), t.device)}
    if index:
        out["indices"] = Tensor(order[begin].astype(np.int64), t.device)
    if inverse:
        where = xp.empty(flat.shape, dtype=np.int64)
        where[order] = xp.cumsum(starts) - 1
        out["inverse_indices"] = Tensor(where.reshape(t.shape), t.device)
    if counts:
        bounds = xp.concatenate([begin, xp.asarray([flat.size])])
        out["counts"] = Tensor(xp.diff(bounds).astype(np.int64), t.device)
    return out


def unique_values(x) -> Tensor:
    """The distinct elements of x, sorted (1-D)."""
    return _unique(x)["values"]


def unique_counts(x) -> UniqueCountsResult:
    return UniqueCountsResult(**_unique(x, counts=True))


def unique_inverse(x) -> UniqueInverseResult:
    return UniqueInverseResult(**_unique(x, inverse=True))


def unique_all(x) -> UniqueAllResult:
    return UniqueAllResult(**_unique(x, index=True, inverse=True, counts=True))
