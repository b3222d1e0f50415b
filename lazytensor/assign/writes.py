"""Values stay values: what must happen just before tensors are written.

Design: docs/design/plans.md, section "lazytensor/assign/writes.py".
"""
from __future__ import annotations

import sys

from lazytensor.core.expr import Expr
from lazytensor.core.readers import memory_of


def before_write(dests, values, private=()) -> list:
    """Call before writing values[i] into the Tensor dests[i] (every value is read before any
    destination is written). Returns, per value, whether it reads the memory of a destination:
    then pass it to after_write once the writes are done. private: nodes of the values that the
    caller knows nothing else holds, though its own frames do (the operand of an in-place
    operator, when it was a temporary)."""
    reads, nodes = readers_of(dests, values, private)
    if len(nodes) == 1:
        _settle(nodes[0])
    elif nodes:
        _settle_together(nodes)
    del nodes
    return reads


def readers_of(dests, values, private=()) -> tuple:
    """-> (per value, whether it reads the memory of a destination; the live nodes that must keep
    their values before the destinations are written, children first). A caller that settles the
    nodes itself (lazytensor.assign.evaluate computes them in the same plan as the write) calls this
    instead of before_write."""
    memories = []
    for dest in dests:
        m = memory_of(dest)
        if m and not any(m is k for k in memories):
            memories.append(m)
    if not memories:
        return [False] * len(values), []
    for m in memories:
        m.drop_stale_origins()
    # The values' DAG is counted first, while no other list holds its nodes, and walked once for
    # all the destinations (an optimizer step writes every parameter).
    return _readers(memories, values, private, _Dag(values))


def readers_to_settle(dest, values, private=()) -> tuple:
    """-> (the live nodes that a write of `values` into `dest` evaluates first, children first;
    per value, whether it reads dest's memory). lt.explain shows the first."""
    m = memory_of(dest)
    if not m:
        return [], [False] * len(values)
    reads, nodes = _readers([m], values, private, _Dag(values))
    return nodes, reads


def _readers(memories, values, private, dag) -> tuple:
    """readers_of for the memories about to be written: (per value, whether it reads one; the
    nodes to settle, those the values reach first, children first)."""
    reads = [False] * len(values)
    direct = set()
    outside = []                            # live readers that the values do not reach
    for m in memories:
        for node in m.sweep():
            result = node.result
            if result is not None and result.memory is not m or id(node) in direct:
                continue                    # settled before (it reads memory of its own), or seen
            direct.add(id(node))
            if id(node) not in dag.extra:
                outside.append(node)
    if not direct:
        return reads, []
    # Inside the values: a node that reads m is settled where something outside holds it (its
    # value is seen from outside); the values themselves keep their destinations after the write.
    reading = dag.reading(direct)
    mine = {id(p) for p in private}
    inside = [n for n in dag.order if id(n) in reading and dag.extra[id(n)] > 0
              and not dag.is_root(n) and id(n) not in mine]
    for j, v in enumerate(values):
        if id(v) in reading:
            reads[j] = True
    return reads, inside + outside


def after_write(dests, values, reads, origins=None) -> None:
    """Give each value that read a destination's memory its own destination as its result.
    origins: {id(value): its Origin}, made before the write (lazytensor.core.origins)."""
    for dest, value, read in zip(dests, values, reads):
        if read and type(value) is Expr and value.result is None:
            value.keep_result(dest, None if origins is None else origins.get(id(value)))


def _settle(node) -> None:
    """Give `node` a value in memory of its own: evaluate it, or copy its result."""
    from lazytensor.core.tensor import empty
    from lazytensor.assign.evaluate import assign
    t = empty(node.shape, node.dtype, node.device)
    assign(t, node.result if node.result is not None else node)
    node.keep_result(t)


def _settle_together(nodes) -> None:
    """Give each node a value in memory of its own, all in ONE simultaneous plan: work they share runs
    once. (Settled one by one, the gradients an optimizer step reads would each run the forward again,
    and a training batch_norm in it would update its running statistics once per gradient.)"""
    from lazytensor.core.tensor import empty
    from lazytensor.assign.simultaneous import run_pairs, settled
    own = [empty(n.shape, n.dtype, n.device) for n in nodes]
    run_pairs([(t, n.result if n.result is not None else settled(n)) for t, n in zip(own, nodes)])
    for t, n in zip(own, nodes):
        n.keep_result(t)


class _Dag:
    """The nodes of the values' DAGs, children before parents (an evaluated node ends its branch:
    its operands are gone), and per node its references from outside them: `extra`, counted as
    the node's reference count less the references from its parents' operands and from `order`."""

    def __init__(self, values):
        self.roots = {id(v) for v in values}
        order, inside = _walk(values)
        self.order = order
        self.extra = dict(zip(map(id, order), _outside_references(order, inside)))

    def is_root(self, node) -> bool:
        return id(node) in self.roots

    def reading(self, direct) -> set:
        """The ids of the nodes that read, themselves or below, a node whose id is in `direct`."""
        out = set()
        for node in self.order:
            key = id(node)
            if key in direct or not out.isdisjoint(map(id, node.args)):
                out.add(key)
        return out


def _walk(values):
    """-> (the nodes of the values' DAGs, children first; {id(node): references to it from the
    operands of those nodes})."""
    order = []
    seen: set = set()
    inside: dict = {}
    for v in values:
        if type(v) is not Expr:
            continue
        stack = [(v, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            for a in node.args:
                if type(a) is Expr:
                    inside[id(a)] = inside.get(id(a), 0) + 1
                    if id(a) not in seen:
                        stack.append((a, False))
    return order, inside


def _outside_references(nodes, inside) -> list:
    """Per node, the references to it from outside the values' DAGs (and outside this module)."""
    return [sys.getrefcount(n) - inside.get(id(n), 0) - _OWN for n in nodes]


# The references this module's own bookkeeping holds while it counts: the list and the loop's.
_OWN = 0
_OWN = _outside_references([object()], {})[0]
