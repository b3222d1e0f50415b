"""Boolean masks of an array's own shape: `a[mask]` as a lazy gather, and `y[mask] = e`,
`y[mask] += e` as ONE fused kernel, `y[...] = where(mask, e', y)`.

Design: docs/design/plans.md, section "lazytensor/ops/masked.py".
"""
from __future__ import annotations

import sys
import weakref

import numpy as np

from lazytensor.core.expr import Const, Expr, apply, astype
from lazytensor.core.operand import Operand
from lazytensor.core.readers import unregister
from lazytensor.core.tensor import Tensor, as_node, asarray
from lazytensor.kernels.ops import OPS
from lazytensor.ops.device_arrays import array_module
from lazytensor.assign.evaluate import result_of


class MaskToken:
    """The key a gather was taken with, as the user passed it (a mask or an index: a Tensor, a NumPy
    array, an evaluated expression, a list), to recognise `y[key] = ...x[key]...` by identity. Held
    by weak reference where the object allows (plan recipes keep their keys' attributes: a large
    mask must not stay alive in them). All tokens compare equal: the plan of a gather does not
    depend on which key it was (plan recipes key on the structure)."""
    __slots__ = ("ref",)

    def __init__(self, obj):
        try:
            self.ref = weakref.ref(obj)
        except TypeError:           # a list: kept (small), and compared by identity all the same
            self.ref = lambda obj=obj: obj

    def of(self, key) -> bool:
        """Whether the gather was taken with this very object."""
        return self.ref() is key

    def __eq__(self, other):
        return isinstance(other, MaskToken)

    def __hash__(self):
        return 0x6D61736B

    def __repr__(self):
        return "mask"


def own_shape_mask(key, shape):
    """The mask of `key` when it is one boolean array (tensor, NumPy array, expression) of `shape`,
    else None."""
    if isinstance(key, tuple):
        if len(key) != 1:
            return None
        key = key[0]
    if isinstance(key, (Operand, np.ndarray)) and key.dtype == np.dtype(bool) and tuple(key.shape) == tuple(shape):
        return key
    return None


def _token(mask):
    """What a mask is recognised by: a tensor itself, an evaluated expression's result, an array."""
    if type(mask) is Expr and mask.result is not None:
        return mask.result
    return mask


def mask_gather(x, mask):
    """x[mask] for a boolean mask of x's shape: a lazy gather node of shape (count,)."""
    x = as_node(x)
    if isinstance(mask, np.ndarray):
        m = asarray(mask, device=x.device)
    else:
        m = result_of(mask)             # a tensor as it is, an expression evaluated once (it keeps the result)
        if m.device != x.device:
            raise ValueError(f"a mask on {m.device!r} for a tensor on {x.device!r}: move one with "
                             f"lt.asarray(x, device=...)")
    count = int(array_module(m.device).count_nonzero(m.data))     # data: a host sync on CUDA
    return Expr("mask_gather", (x, m), (count,), x.dtype, x.device, heavy=True, attrs=MaskToken(_token(mask)))


def fused_write(dest, mask, value) -> bool:
    """dest[mask] = value as one elementwise assignment where value has an elementwise form over
    dest's shape (module docstring); False where it has none (nothing was written). Called first
    thing by lazytensor.ops.indexing.setitem, itself called by Tensor.__setitem__: the references
    to `value` that this call path holds are counted (_TEMPORARY_REFS)."""
    from lazytensor.ops.elementwise import where
    from lazytensor.assign.evaluate import assign
    token = _token(mask)
    if isinstance(mask, np.ndarray):
        mask = asarray(mask, device=dest.device)    # (in an expression a NumPy array would be a CPU tensor)
    if not isinstance(value, (Operand, np.ndarray)):
        if isinstance(value, (list, tuple)):
            return False
        assign(dest, where(mask, value, dest))         # a scalar
        return True
    if isinstance(value, np.ndarray):
        if value.size != 1:
            return False
        assign(dest, where(mask, asarray(value, device=dest.device).reshape(()), dest))
        return True
    temporary = _frame_refs(value) <= _TEMPORARY_REFS
    consumed: list = []
    spread = _spread(value, token, tuple(dest.shape), {}, consumed)
    if spread is None:
        return False
    if tuple(spread.shape) != tuple(dest.shape) and _size(spread.shape) != 1:
        return False
    if consumed and temporary:
        _retire(value, consumed)
    del value
    assign(dest, where(mask, spread, dest))
    return True


def _frame_refs(value) -> int:
    return sys.getrefcount(value)


def _retire(value, consumed, planned=False) -> None:
    """The gathers a fused write replaced by their operands, in a value nothing but this call holds
    (`y[mask] += e` builds one): nothing can evaluate them after the write, so they stop reading
    their tensors and operands, which the write would otherwise evaluate first to keep their
    values. Only where every node from the value down to them is held by nothing else. planned:
    gathers that the write's plan still computes (its steps read them before the write)."""
    from lazytensor.assign.writes import _Dag
    dag = _Dag([value])
    gathers = {id(g) for g in consumed}
    path = dag.reading(gathers)
    # (the list `consumed` holds each gather once more)
    if any(dag.extra[id(n)] > (id(n) in gathers) for n in dag.order if id(n) in path and n is not value):
        return
    del dag, path
    for g in consumed:
        for a in g.args:
            if type(a) is Tensor:
                unregister(g, a)
        if not planned:             # (planned: the write's own plan still runs them, before it writes)
            g.args = ()
            g.heavy = False


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _spread(node, token, shape, memo, consumed):
    """`node` (a value for dest[mask]) rebuilt over dest's `shape`: gathers with this mask become
    their operand, one-element operands stay (as 0-d), elementwise ops are rebuilt over those. None
    where some part of it has no such form."""
    from lazytensor.ops.views import reshape
    if isinstance(node, Const):
        return node
    hit = memo.get(id(node))
    if hit is not None:
        return hit
    gather = type(node) is Expr and node.result is None and node.op == "mask_gather"
    elementwise = type(node) is Expr and node.result is None and (node.op in OPS or node.op == "astype")
    out = None
    if gather and node.attrs.of(token) and tuple(node.args[0].shape) == shape:
        out = node.args[0]
        consumed.append(node)
    elif elementwise:
        args = [_spread(a, token, shape, memo, consumed) for a in node.args]
        if all(a is not None for a in args):
            if node.op == "astype":
                out = astype(args[0], node.dtype)
            else:
                out = apply(node.op, *[a.dtype.type(a.value) if isinstance(a, Const) else a for a in args])
                if out.dtype != node.dtype:
                    out = astype(out, node.dtype)
    if out is None and _size(node.shape) == 1:
        out = reshape(node, ())                    # one element: it broadcasts over dest's shape
    memo[id(node)] = out
    return out


class _Probe:
    """The call path of `y[mask] = value` (Tensor.__setitem__ -> indexing.setitem -> fused_write),
    to count the references that path itself holds to a temporary value."""
    def __setitem__(self, key, value):
        return _probe_setitem(self, key, value)


def _probe_setitem(dest, key, value):
    return _probe_fused_write(dest, key, value)


def _probe_fused_write(dest, mask, value):
    _Probe.count = _frame_refs(value)


_Probe()[0] = object()
_TEMPORARY_REFS = _Probe.count


def rebuilt(node, replace):
    """`node` with each node n of its elementwise part for which replace(n) is not None replaced by
    it, the elementwise ops above rebuilt (NumPy's promotion again; casts kept); None where a
    replacement's shape does not fit."""
    memo: dict = {}

    def walk(n):
        hit = memo.get(id(n))
        if hit is not None:
            return hit
        out = replace(n)
        if out is None:
            out = n
            if type(n) is Expr and n.result is None and (n.op in OPS or n.op == "astype"):
                args = [walk(a) for a in n.args]
                if any(a is not b for a, b in zip(args, n.args)):
                    if n.op == "astype":
                        out = astype(args[0], n.dtype)
                    else:
                        out = apply(n.op, *[a.dtype.type(a.value) if isinstance(a, Const) else a for a in args])
                        if out.dtype != n.dtype:
                            out = astype(out, n.dtype)
        memo[id(n)] = out
        return out

    try:
        return walk(node)
    except ValueError:
        return None
