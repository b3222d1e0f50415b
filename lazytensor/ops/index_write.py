"""`y[idx] = e` for one integer index array along the first axis, as ONE fused scatter kernel: the
node "index_write" (y with y[idx] = e applied, of y's shape) is planned by
lazytensor.plan.index_write_plan; assigning it into y itself is the scatter alone.

e is any expression broadcastable to NumPy's value shape (len(idx),) + y.shape[1:]; its elementwise
work runs inside the scatter kernel. The index is evaluated and checked against the bounds when the
write is built (NumPy's IndexError; on CUDA a host sync). Repeated entries: the last write wins on
the CPU, as NumPy; on CUDA the winner is undefined, as CuPy. `y[idx] += e` gathers y[idx] first (a
copy, so repeated entries add once, as NumPy's buffered assignment) and scatters y[idx] + e with
the same kernel."""
from __future__ import annotations

import numpy as np

from lazytensor.core import dtypes as _dt
from lazytensor.core.expr import Expr, astype
from lazytensor.core.operand import Operand
from lazytensor.core.shapes import broadcast_shapes
from lazytensor.core.tensor import Tensor, as_node, asarray
from lazytensor.ops.device_arrays import array_module, evaluated
from lazytensor.plan import index_write_plan as _index_write_plan  # noqa: F401  (registers its planner)


def row_index(key):
    """The index array of `key` when it is one integer index array along the first axis (a list, a NumPy
    array or a tensor of any integer dtype, one dimension), else None."""
    if isinstance(key, tuple):
        if len(key) != 1:
            return None
        key = key[0]
    if isinstance(key, list):
        key = np.asarray(key) if key else np.zeros(0, np.int64)       # NumPy takes [] as no rows
        if key.dtype.kind not in "iu":
            return None
    if isinstance(key, (Operand, np.ndarray)) and key.dtype.kind in "iu" and len(key.shape) == 1:
        return key
    return None


def index_write(y, index, value):
    """y with y[index] = value applied, lazily (an expression of y's shape)."""
    y = as_node(y)
    xp = array_module(y.device)
    if isinstance(index, np.ndarray):
        idx = asarray(index.astype(np.int64, copy=False), device=y.device)
    else:
        idx = evaluated(index)
        if idx.device != y.device:
            raise ValueError(f"an index on {idx.device!r} for a tensor on {y.device!r}: move one with "
                             f"lt.asarray(x, device=...)")
        if idx.dtype != np.int64:
            idx = Tensor(idx.data.astype(np.int64), idx.device)
    n = y.shape[0] if y.shape else 0
    if len(y.shape) == 0:
        raise IndexError("too many indices for array: array is 0-dimensional, but 1 were indexed")
    if idx.shape[0]:
        hi, lo = int(xp.max(idx.data)), int(xp.min(idx.data))        # a host sync on CUDA
        if hi >= n or lo < -n:
            raise IndexError(f"index {hi if hi >= n else lo} is out of bounds for axis 0 with size {n}")
    value_shape = (idx.shape[0],) + tuple(y.shape[1:])
    v = value if isinstance(value, Operand) else asarray(value, device=y.device) if isinstance(value, (np.ndarray, list, tuple)) else None
    if v is None:
        from lazytensor.plan.evaluate import _as_expression
        v = _as_expression(value, y)
    if v.device is not None and v.device != y.device:
        raise ValueError(f"cannot assign an expression on {v.device!r} to a tensor on {y.device!r}")
    if tuple(v.shape) != value_shape:
        try:
            if broadcast_shapes(tuple(v.shape), value_shape) != value_shape:
                raise ValueError
        except ValueError:
            raise ValueError(f"shape mismatch: value array of shape {tuple(v.shape)} could not be broadcast to "
                             f"indexing result of shape {value_shape}") from None
    if v.dtype != y.dtype:
        _dt.check_cast(v.dtype, y.dtype, "assign")
        v = astype(v, y.dtype)
    return Expr("index_write", (y, v, idx), tuple(y.shape), y.dtype, y.device, heavy=True)
