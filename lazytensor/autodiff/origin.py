"""An evaluated expression as it was computed, for gradients.

An evaluated node keeps its value and drops its operands (README "Values stay values"); its
`origin` (lazytensor.core.expr.Origin) keeps them, with the write counts of the tensors below. A
gradient through it works on a stand-in node with those operands, provided none of the tensors was
written since; else it is a clear error, never a gradient of other values.
"""
from __future__ import annotations

from lazytensor.core.expr import Expr


def as_computed(node, cache=None):
    """The node as it was computed: itself, or for an evaluated node (which keeps its value and drops
    its operands, README "Values stay values") a stand-in with the operands kept in its origin,
    provided none of the tensors below was written since (else its gradient cannot be had)."""
    if type(node) is not Expr or node.result is None:
        return node
    hit = None if cache is None else cache.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    origin = node.origin
    stale = None if origin is None else origin.stale()
    if origin is None or stale is not None:
        what = "" if stale is None else f": a tensor it read ({stale.dtype.name} {stale.shape}) was written since"
        raise ValueError(f"lt.grad: the expression {node!r:.120} was evaluated and cannot be differentiated any "
                         f"more{what}; take the gradients before writing the tensors it reads")
    stand_in = object.__new__(Expr)         # not built through Expr(): its operands stay as they were
    for slot, v in (("op", node.op), ("args", origin.args), ("shape", node.shape), ("dtype", node.dtype),
                    ("device", node.device), ("heavy", origin.heavy), ("attrs", node.attrs), ("skey", None),
                    ("leaves", ()), ("scalars", ()), ("shared", True), ("uses", 0), ("last_plan", None),
                    ("result", None), ("epoch", node.epoch), ("origin", None)):
        setattr(stand_in, slot, v)
    if cache is not None:
        cache[id(node)] = (node, stand_in)
    return stand_in
