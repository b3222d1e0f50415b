"""The Origins of several nodes evaluated together, from one walk of their DAGs.

Origin(node) walks everything below its node to record the write count of each tensor it reads
(lazytensor.core.expr.Origin). A plan with several results keeps a result for each of its values
and for each live expression reading a destination (an optimizer step: every gradient, the loss,
every update): one walk per node would read the shared forward and backward once per result. Here
each node below is visited once, its tensors gathered as a bit set (an int, one bit per tensor),
and every Origin shares one record of the write counts (WriteCounts), taking its node's bits.
"""
from __future__ import annotations

from lazytensor.core.expr import Expr, Origin, WriteCounts
from lazytensor.core.tensor import Tensor


def _below(node) -> tuple:
    """What Origin walks below a node: its operands, or for an evaluated one, those it was computed from."""
    if node.result is not None and node.origin is not None:
        return node.origin.args
    return node.args


def origins_of(nodes) -> list:
    """[Origin(node) for node in nodes], with the write counts of now: call it before the plan that
    evaluates them writes anything."""
    tensors: list = []
    bit: dict = {}                  # id(tensor) -> its bit
    masks: dict = {}                # id(Expr) -> the bits of the tensors below it
    for root in nodes:
        if root.result is not None:
            continue                # kept before: Origin(root) below, as keep_result makes it
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            key = id(node)
            if done:
                mask = 0
                for a in _below(node):
                    t = type(a)
                    if t is Tensor:
                        b = bit.get(id(a))
                        if b is None:
                            b = bit[id(a)] = 1 << len(tensors)
                            tensors.append(a)
                        mask |= b
                    elif t is Expr:
                        mask |= masks[id(a)]
                masks[key] = mask
                continue
            if key in masks:
                continue
            stack.append((node, True))
            stack.extend((a, False) for a in _below(node) if type(a) is Expr and id(a) not in masks)
    counts = WriteCounts(tensors)
    origins = []
    for node in nodes:
        if node.result is not None:
            origins.append(Origin(node))
            continue
        o = Origin.__new__(Origin)
        o.args, o.heavy = node.args, node.heavy
        o.counts, o.mask = counts, masks[id(node)]
        counts.add(o)
        origins.append(o)
    return origins
