"""Writes to an expression (`y[k] = v`, `y += v` where y is an Expr), with NumPy's meaning.

The first write gives the expression memory of its own: its value goes into a new Tensor that it
keeps as its result, and that write and every later one go there, so every name bound to it sees
them. Expressions built on it before keep the value it had: they are evaluated first.
Design: docs/design/plans.md
"""
from __future__ import annotations

import gc
import sys
import weakref

from lazytensor.core.expr import Expr, astype
from lazytensor.core.origins import origins_of
from lazytensor.core.readers import unregister
from lazytensor.core.tensor import Tensor, empty
from lazytensor.assign.evaluate import assign, check_write
from lazytensor.assign.simultaneous import run_pairs, settled

# id(node) -> node, for the expressions that own their result (written through, never copied).
_owners: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def owns_memory(node) -> bool:
    """Whether writes to the expression `node` go into its result."""
    return _owners.get(id(node)) is node


def memory_for_writes(node: Expr, holders: int = 2, operands=()) -> Tensor:
    """The Tensor that writes to `node` go into: its own result, made on the first write.
    holders: the references to `node` outside the writing call (the user's names, the operands of
    nodes built on it); operands: what the write reads (its key and value). Where the nodes built
    on `node` inside those account for all holders but one (the user's name), or for every node
    ever built on it (its uses), they are all."""
    if _owners.get(id(node)) is node:
        return node.result
    parents, held = _parents_in(node, operands) if holders > 1 else ([], 0)
    if holders - held > 1 and node.uses + getattr(node, "heavy_uses", 0) != held:
        parents = _live_parents(node)
    # Its value so far, in new memory: a result it had may be another tensor's memory (it was
    # written there) or a Tensor lt.evaluate handed out, and neither may see this write.
    own = empty(node.shape, node.dtype, node.device)
    fresh = node.result is None
    origins = origins_of(parents + [node]) if fresh else origins_of(parents) + [node.origin]
    if parents:
        held = [empty(p.shape, p.dtype, p.device) for p in parents]
        run_pairs([(t, settled(p)) for t, p in zip(held, parents)] + [(own, settled(node))])
        for t, p, o in zip(held, parents, origins):
            p.keep_result(t, o)
    else:
        assign(own, node.result if not fresh else node)
    origin = origins[-1]
    node.keep_result(own, origin)
    unregister(node, own)           # its value IS that memory: a write there must not settle it
    if origin is not None:          # a gradient through it after a write is refused, not wrong
        origin.also(own)
    _owners[id(node)] = node
    return own


def updated_value(node: Expr, value: Expr) -> Expr:
    """The value an in-place op gives `node` where nothing but the writing statement holds it: the
    new expression, checked and cast as a write into `node`'s memory would be."""
    check_write(value, node, "apply an in-place op from")
    return astype(value, node.dtype)


class _Probe:
    """The call shapes of a write to an expression (`y[k] = v`, `y += v`, `y.fill(v)`), to count
    the references each one holds to `y` while it runs, as array_methods' writers count them."""
    def __setitem__(self, key, value): self.count = sys.getrefcount(self)
    def __iadd__(self, o):
        self.count = sys.getrefcount(self)
        return self
    def method(self): self.count = sys.getrefcount(self)


def _call_references() -> tuple:
    probe = _Probe()
    probe[0] = 0
    item = probe.count
    probe += 0
    inplace = probe.count
    probe.method()
    return item - 1, inplace - 1, probe.count - 1      # less the one local name that holds it


ITEM_REFS, INPLACE_REFS, METHOD_REFS = _call_references()


def _parents_in(node, operands) -> tuple:
    """(the unevaluated nodes in the DAGs of `operands` that take `node` as an operand; how many
    references to `node` their operands hold)."""
    parents, refs, seen = [], 0, set()
    stack = [o for o in (operands if isinstance(operands, (tuple, list)) else (operands,)) if type(o) is Expr]
    while stack:
        p = stack.pop()
        if id(p) in seen or p.result is not None:
            continue
        seen.add(id(p))
        n = sum(a is node for a in p.args)
        if n:
            parents.append(p)
            refs += n
        stack.extend(a for a in p.args if type(a) is Expr and a is not node)
    return parents, refs


def _live_parents(node: Expr) -> list:
    """The live, unevaluated expressions that take `node` as an operand. A node does not list its
    parents (that would cost every operator a user writes); a write to an expression is rare
    enough to ask the garbage collector which operand tuples hold it, and which nodes hold those."""
    tuples = [r for r in gc.get_referrers(node) if type(r) is tuple]
    if not tuples:
        return []
    ids = {id(t) for t in tuples}
    return [p for p in gc.get_referrers(*tuples)
            if type(p) is Expr and p.result is None and id(p.args) in ids]
