"""np.pad. 'constant' and 'edge' are lazy: one concatenation per padded axis of the operand with
broadcast blocks (the constant, or the edge's slice), a heavy node each whose parts are computed
straight into the result. The other modes compute their pads from the values (reflections, means,
ramps): the operand is evaluated and the device's array library (NumPy or CuPy) pads it."""
from __future__ import annotations

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.tensor import Tensor
from lazytensor.ops.device_arrays import array_module, evaluated
from lazytensor.ops.joining import concatenate
from lazytensor.ops.operands import operand
from lazytensor.ops.views import broadcast_to, getitem


def _pairs(value, ndim, what):
    arr = np.asarray(value)
    if what == "pad_width":
        if arr.dtype.kind not in "iu" or (arr < 0).any():
            raise ValueError("index can't contain negative values" if arr.dtype.kind in "iu"
                             else "`pad_width` must be of integral type.")
    try:
        return np.broadcast_to(arr, (ndim, 2))
    except ValueError:
        raise ValueError(f"{what} of shape {arr.shape} cannot be broadcast to ({ndim}, 2)") from None


def pad(array, pad_width, mode="constant", **kwargs):
    """np.pad with NumPy's pad_width forms ((before, after) per axis, one pair, or one number) and
    modes; 'constant' (constant_values=) and 'edge' lazily, the others evaluated now."""
    x = operand(array)
    widths = _pairs(pad_width, x.ndim, "pad_width")
    if mode == "constant" and set(kwargs) <= {"constant_values"}:
        values = _pairs(kwargs.get("constant_values", 0), x.ndim, "constant_values")
        return _lazy(x, widths, values)
    if mode == "edge" and not kwargs:
        if any(x.shape[i] == 0 and widths[i].any() for i in range(x.ndim)):
            raise ValueError("can't extend empty axis using modes other than 'constant' or 'empty'")
        return _lazy(x, widths, None)
    t = evaluated(x)
    xp = array_module(t.device)
    return Tensor(xp.pad(t.data, widths.tolist(), mode=mode, **kwargs), t.device)


def _lazy(x, widths, values):
    original = x
    for axis in range(x.ndim):
        before, after = (int(w) for w in widths[axis])
        if not before and not after:
            continue
        parts = []
        for side, width in ((0, before), (1, after)):
            if not width:
                continue
            shape = tuple(width if i == axis else d for i, d in enumerate(x.shape))
            if values is None:
                edge = (slice(None),) * axis + (slice(0, 1) if side == 0 else slice(-1, None),)
                block = broadcast_to(getitem(x, edge), shape)
            else:
                fill = _tensor.asarray(np.asarray(values[axis][side]).astype(x.dtype), device=x.device)
                block = broadcast_to(fill, shape)
            parts.append((side, block))
        x = concatenate([b for s, b in parts if s == 0] + [x] + [b for s, b in parts if s == 1], axis=axis)
    if x is original:       # nothing padded: still a new array, as NumPy's, not the operand itself
        from lazytensor.core.expr import apply
        return apply("trunc", x) if x.dtype.kind in "biu" else apply("add", x, -0.0)
    return x
