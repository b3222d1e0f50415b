"""Planning a lazy concatenate (lazytensor.ops.joining): one step per part, each evaluating the
part's expression (one fused kernel, or the part's own heavy steps) straight into its slice of one
result array. No part is evaluated into a temporary of its own.

The result array is the plan's destination when the concatenation is the root of the plan
(`y[...] = lt.concatenate(...)`, `lt.evaluate(...)`), else a temporary that the elementwise work
above reads in the next fused kernel. A part that reads the destination's memory
(`a[...] = lt.concatenate([a[1:], a[:1]])`) would see the slices written before it: then the parts
go into a temporary, copied into the destination after the last one (explain says so).
"""
from __future__ import annotations

from lazytensor.core.expr import astype
from lazytensor.core.memory import may_overlap
from lazytensor.core.tensor import Tensor
from lazytensor.plan.elementwise import copy_step


def build_concatenate(node, backend, cut, out):
    axis = node.attrs
    parts = [cut(p) for p in node.args]
    target = out
    if out is not None and any(may_overlap(leaf.data, out) for p in parts for leaf in p.leaves):
        target = None       # a part reads the destination: writing slices first would change it
    if target is None:
        target = backend.empty(tuple(node.shape), node.dtype)
    steps: list = []
    start = 0
    for i, part in enumerate(parts):
        stop = start + part.shape[axis]
        if stop > start:
            region = target[(slice(None),) * axis + (slice(start, stop),)]
            written = cut.plan(astype(part, node.dtype), region, backend)
            written[-1].note = (f"part {i} of {len(parts)} of the concatenation along axis {axis}, "
                                f"written into its slice [{start}:{stop}] of the result")
            steps += written
        start = stop
    if out is not None and target is not out:
        steps.append(copy_step(backend, target, out, "a part reads the destination: the parts were "
                                                     "written into a temporary, copied here"))
    return steps, Tensor(target, node.device)

