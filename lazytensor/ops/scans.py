"""Scans: cumsum, cumprod (the Array API's cumulative_sum, cumulative_prod), with NumPy's result
dtypes (small integers and bool accumulate in the default integer, float16 in float16 rounded at
every step). A scan is a heavy node, like a reduction: its plan (lazytensor.plan.heavy.scans) is one
kernel that computes the elementwise expression feeding it as it scans, and what reads the result
fuses into a following kernel. Its gradient (cumsum's) is in lazytensor.autodiff.rules_scans."""
from __future__ import annotations

import numpy as np

from lazytensor.core import dtypes as _dt
from lazytensor.core.expr import Expr
from lazytensor.core import tensor as _tensor
from lazytensor.kernels.scan import Scan
from lazytensor.ops.views import ravel, broadcast_to

_dtypes: dict = {}


def _result_dtype(kind, src: np.dtype, dtype) -> np.dtype:
    """NumPy's own choice, asked of NumPy once per case."""
    key = (kind, src, dtype)
    out = _dtypes.get(key)
    if out is None:
        out = _dtypes[key] = np.dtype(getattr(np, kind)(np.zeros(1, src), dtype=dtype).dtype)
    return out


def _scan(kind, x, axis, dtype, include_initial=False):
    x = _tensor.as_node(x)
    if dtype is not None:
        dtype = _dt.check_supported(dtype)
    if axis is None:
        x, axis = ravel(x), 0
    nd = len(x.shape)
    axis = int(axis)
    if not -nd <= axis < nd:
        raise np.exceptions.AxisError(f"axis {axis} is out of bounds for array of dimension {nd}")
    axis %= nd
    out_dtype = _result_dtype(kind, x.dtype, dtype)
    spec = Scan(kind, axis, tuple(x.shape), out_dtype)
    node = Expr("scan", (x,), spec.shape, out_dtype, x.device, heavy=True, attrs=spec)
    if not include_initial:
        return node
    from lazytensor.ops.joining import concatenate
    first = list(spec.shape)
    first[axis] = 1
    identity = _tensor.asarray(np.full((), spec.identity, out_dtype), device=x.device)
    return concatenate([broadcast_to(identity, tuple(first)), node], axis=axis)


def cumsum(x, axis=None, dtype=None):
    """np.cumsum along `axis` (None: of the flattened x), lazily."""
    return _scan("cumsum", x, axis, dtype)


def cumprod(x, axis=None, dtype=None):
    """np.cumprod along `axis` (None: of the flattened x), lazily."""
    return _scan("cumprod", x, axis, dtype)


def cumulative_sum(x, axis=None, dtype=None, include_initial=False):
    """np.cumulative_sum: as cumsum, but axis may be None only for 1-D x; include_initial
    prepends the 0."""
    return _scan("cumsum", x, _cumulative_axis(x, axis), dtype, include_initial)


def cumulative_prod(x, axis=None, dtype=None, include_initial=False):
    return _scan("cumprod", x, _cumulative_axis(x, axis), dtype, include_initial)


def _cumulative_axis(x, axis):
    if axis is None:
        if len(x.shape) != 1:
            raise ValueError("axis must be specified for multi-dimensional arrays")
        return 0
    return axis
