"""`y[idx] = e` for one integer index array along the first axis, as ONE fused scatter kernel: the
node "index_write" (y with y[idx] = e applied, of y's shape) is planned by
lazytensor.plan.heavy.index_write; assigning it into y itself is the scatter alone.

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
from lazytensor.core.memory import may_overlap
from lazytensor.core.operand import Operand
from lazytensor.core.shapes import broadcast_shapes
from lazytensor.core.tensor import Tensor, as_node, asarray
from lazytensor.ops.device_arrays import array_module, evaluated


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


def _checked_index(y, index) -> Tensor:
    """`index` as an int64 tensor on y's device, checked against y's first axis (NumPy's IndexError;
    a host sync on CUDA)."""
    xp = array_module(y.device)
    if len(y.shape) == 0:
        raise IndexError("too many indices for array: array is 0-dimensional, but 1 were indexed")
    if isinstance(index, np.ndarray):
        idx = asarray(index.astype(np.int64, copy=False), device=y.device)
    else:
        idx = evaluated(index)
        if idx.device != y.device:
            raise ValueError(f"an index on {idx.device!r} for a tensor on {y.device!r}: move one with "
                             f"lt.asarray(x, device=...)")
        if idx.dtype != np.int64:
            idx = Tensor(idx.data.astype(np.int64), idx.device)
    n = y.shape[0]
    if idx.shape[0]:
        hi, lo = int(xp.max(idx.data)), int(xp.min(idx.data))
        if hi >= n or lo < -n:
            raise IndexError(f"index {hi if hi >= n else lo} is out of bounds for axis 0 with size {n}")
    return idx


def key_object(key):
    """The object a user indexed with (recognised by identity, lazytensor.ops.masked.MaskToken)."""
    if isinstance(key, tuple) and len(key) == 1:
        key = key[0]
    if type(key) is Expr and key.result is not None:
        return key.result
    return key


def row_gather(x, key):
    """x[idx] for one integer index array along the first axis: a lazy gather of shape
    (len(idx),) + x.shape[1:], planned as the array library's take (lazytensor.plan.heavy.index_write)."""
    from lazytensor.ops.masked import MaskToken
    x = as_node(x)
    idx = _checked_index(x, row_index(key))
    return Expr("row_gather", (x, idx), (idx.shape[0],) + tuple(x.shape[1:]), x.dtype, x.device, heavy=True,
                attrs=MaskToken(key_object(key)))


class RowsFromDestination:
    """attrs of an index_write whose values read the destination's own rows (`y[idx] += e`): the
    placeholder tensor standing for y[idx] in the values, which the scatter kernel reads as
    out[idx[j], ...] just before writing it. All compare equal (plan recipes key on structure)."""
    __slots__ = ("placeholder",)

    def __init__(self, placeholder):
        self.placeholder = placeholder

    def __eq__(self, other):
        return isinstance(other, RowsFromDestination)

    def __hash__(self):
        return 0x726F7773


def index_write(y, index, value, rows_from_destination=None):
    """y with y[index] = value applied, lazily (an expression of y's shape)."""
    y = as_node(y)
    idx = _checked_index(y, index)
    value_shape = (idx.shape[0],) + tuple(y.shape[1:])
    v = value if isinstance(value, Operand) else asarray(value, device=y.device) if isinstance(value, (np.ndarray, list, tuple)) else None
    if v is None:
        from lazytensor.assign.evaluate import _as_expression
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
    return Expr("index_write", (y, v, idx), tuple(y.shape), y.dtype, y.device, heavy=True, attrs=rows_from_destination)


def fused_index_write(dest, key, value) -> None:
    """dest[key] = value for one integer index array along the first axis, as ONE scatter kernel. Where
    value is built on gathers dest[key] with this same key (`y[idx] += e`) and the index has no
    repeated entry, the kernel reads those rows of dest itself, just before writing them: no gather
    runs. Called by lazytensor.ops.indexing.setitem as masked.fused_write is (the references to
    `value` that the call path holds are counted the same way)."""
    from lazytensor.ops.masked import _TEMPORARY_REFS, _frame_refs, _retire, rebuilt
    from lazytensor.assign.evaluate import assign
    temporary = isinstance(value, Operand) and _frame_refs(value) <= _TEMPORARY_REFS
    token = key_object(key)
    rows = row_index(key)
    consumed: list = []
    if isinstance(value, Expr) and value.result is None:
        _find_row_gathers(value, token, dest, consumed, set())
    if not consumed:
        assign(dest, index_write(dest, rows, value))
        return
    idx = consumed[0].args[1]
    xp = array_module(dest.device)
    rows_written = xp.where(idx.data < 0, idx.data + dest.shape[0], idx.data)      # -1 and n - 1 are one row
    repeats = idx.shape[0] != int(xp.unique(rows_written).shape[0])                # a host sync on CUDA
    value_shape = (idx.shape[0],) + tuple(dest.shape[1:])
    placeholder = Tensor(xp.broadcast_to(xp.zeros((), dest.dtype), value_shape), dest.device)
    ids = {id(g) for g in consumed}
    new_value = None if repeats else rebuilt(value, lambda n: placeholder if id(n) in ids else None)
    if (new_value is None or new_value.heavy or
            any(may_overlap(leaf.data, dest.data) for leaf in new_value.leaves if leaf is not placeholder)):
        # Repeated rows (NumPy's buffered update: each adds once), other heavy parts or other reads of
        # dest: the gathers run first in the write's plan, then the scatter.
        if temporary:
            _retire(value, consumed, planned=True)
        assign(dest, index_write(dest, rows, value))
        return
    if temporary:
        _retire(value, consumed)
    del value
    assign(dest, index_write(dest, idx, new_value, RowsFromDestination(placeholder)))


def _find_row_gathers(node, token, dest, found, seen):
    """The gathers dest[key] (this key object) in node's elementwise part."""
    if type(node) is not Expr or node.result is not None or id(node) in seen:
        return
    seen.add(id(node))
    if node.op == "row_gather":
        if node.attrs.of(token) and node.args[0] is dest:
            found.append(node)
        return
    from lazytensor.kernels.ops import OPS
    if node.op in OPS or node.op == "astype":
        for a in node.args:
            _find_row_gathers(a, token, dest, found, seen)
