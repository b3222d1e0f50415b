"""searchsorted and count_nonzero. count_nonzero is lazy: `x != 0` summed as int64, one fused
reduction kernel. searchsorted is a binary search over data, no elementwise work to fuse: its
operands are evaluated and searched by the device's array library (NumPy or CuPy)."""
from __future__ import annotations

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import binary
from lazytensor.core.operand import Operand
from lazytensor.core.tensor import Tensor
from lazytensor.ops.device_arrays import array_module, evaluated
from lazytensor.ops.reductions import reduce


def count_nonzero(x, axis=None, keepdims=False):
    """np.count_nonzero: how many elements are nonzero (true), as int64, over `axis` (None: all)."""
    x = _tensor.as_node(x)
    return reduce("sum", binary("not_equal", x, False if x.dtype == np.bool_ else 0), axis=axis,
                  keepdims=keepdims, dtype=np.int64)


def searchsorted(a, v, side="left", sorter=None) -> Tensor:
    """np.searchsorted: where each element of v would be inserted into the 1-D sorted a (or a
    sorted through `sorter`) to keep it sorted; int64 indices of v's shape."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    t = evaluated(a)
    if t.ndim != 1:
        raise ValueError(f"searchsorted: the sorted array must be 1-D, got shape {t.shape}")
    xp = array_module(t.device)
    values = _device_data(v, t.device, xp)
    order = None if sorter is None else _device_data(sorter, t.device, xp)
    if order is not None and order.dtype.kind not in "iu":
        raise TypeError(f"searchsorted: sorter must hold integer indices, got {order.dtype.name}")
    dtype = np.result_type(t.dtype, values.dtype)    # compare in one dtype, as NumPy does
    out = xp.searchsorted(t.data.astype(dtype, copy=False), values.astype(dtype, copy=False), side=side,
                          sorter=order)
    return Tensor(xp.asarray(out, dtype=np.int64), t.device)


def _device_data(x, device, xp):
    if isinstance(x, Operand):
        t = evaluated(x)
        if t.device != device:
            raise ValueError(f"searchsorted: an operand on {t.device!r} for a sorted array on {device!r}: move one "
                             f"with lt.asarray(x, device=...)")
        return t.data
    return xp.asarray(x)
