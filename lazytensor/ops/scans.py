"""Scans: cumsum, cumprod (the Array API's cumulative_sum, cumulative_prod), with NumPy's result
dtypes (small integers and bool accumulate in the default integer). The elementwise expression
feeding the scan is evaluated first as one fused kernel; the scan itself runs in the device's
array library (NumPy or CuPy)."""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import Tensor
from lazytensor.ops.device_arrays import array_module, evaluated


def _scan(kind, x, axis, dtype, include_initial=False):
    t = evaluated(x)
    xp = array_module(t.device)
    data = t.data.reshape(-1) if axis is None else t.data
    axis = 0 if axis is None else axis
    if dtype is None:
        dtype = getattr(np, kind)(np.zeros(1, t.dtype)).dtype    # NumPy's own choice for t.dtype
    out = getattr(xp, kind)(data, axis=axis, dtype=dtype)
    if include_initial:
        shape = list(out.shape)
        shape[axis] = 1
        first = xp.full(shape, 0 if kind == "cumsum" else 1, dtype=out.dtype)
        out = xp.concatenate([first, out], axis=axis)
    return Tensor(out, t.device)


def cumsum(x, axis=None, dtype=None) -> Tensor:
    """np.cumsum along `axis` (None: of the flattened x)."""
    return _scan("cumsum", x, axis, dtype)


def cumprod(x, axis=None, dtype=None) -> Tensor:
    """np.cumprod along `axis` (None: of the flattened x)."""
    return _scan("cumprod", x, axis, dtype)


def cumulative_sum(x, axis=None, dtype=None, include_initial=False) -> Tensor:
    """np.cumulative_sum: as cumsum, but axis may be None only for 1-D x; include_initial
    prepends the 0."""
    return _scan("cumsum", x, _cumulative_axis(x, axis), dtype, include_initial)


def cumulative_prod(x, axis=None, dtype=None, include_initial=False) -> Tensor:
    return _scan("cumprod", x, _cumulative_axis(x, axis), dtype, include_initial)


def _cumulative_axis(x, axis):
    if axis is None:
        if len(x.shape) != 1:
            raise ValueError("axis must be specified for multi-dimensional arrays")
        return 0
    return axis
