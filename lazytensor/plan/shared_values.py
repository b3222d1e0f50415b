"""Which elementwise values a plan evaluates once into a temporary rather than in every kernel that reads them.

Design: docs/design/plans.md, section "lazytensor/plan/shared_values.py".
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.expr import Const, Expr

MIN_SAVED = 4       # full-size passes over memory a temporary must save


def shared_wide_values(roots, heavy_ops) -> dict:
    """{id(node): why} for the elementwise nodes under `roots` to evaluate once, and the ids of
    their ancestors (value None), whose operands the planner must then visit.
    heavy_ops: the ops that are steps of their own (the table of heavy ops, lazytensor.plan.heavy.table): each operand of one is
    read by that step's kernel, a kernel region of its own; so is a value evaluated once.
    Nodes are decided parents first, so a value inside one evaluated once counts its readers anew:
    of `v = (a*b + c*d) + e`, read by three kernels, v is evaluated once and a*b + c*d is then read
    by v's kernel alone."""
    roots = [r for r in roots if type(r) is Expr]
    order = _parents_first(roots)
    parents: dict = {}
    for node in order:
        for a in node.args:
            if type(a) is Expr:
                parents.setdefault(id(a), []).append(node)
    # The results of one shape are one kernel (several outputs): one region per shape.
    regions: dict = {id(r): {("result", tuple(r.shape))} for r in roots}
    root_ids = set(regions)
    chosen: dict = {}
    for node in order:
        if not _elementwise(node, heavy_ops):
            continue
        here = set(regions.get(id(node), ()))
        for p in parents.get(id(node), ()):
            if p.op in heavy_ops or id(p) in chosen:
                here.add(("step", id(p)))         # p's step (or temporary) reads node in a kernel of its own
            else:
                here |= regions.get(id(p), set())
        regions[id(node)] = here
        m = len(here)
        if m < 2 or id(node) in root_ids:     # a result is written where it belongs: no temporary first
            continue
        if _widening(node):
            # Its operand is evaluated once instead (decided next, read by the same kernels): the same
            # values in fewer bytes (a float16 gradient rather than its float32 copy), widened as
            # each kernel loads it; of a tensor, nothing is stored at all.
            continue
        k = _full_size_arrays(node, heavy_ops)
        if m * k - (k + 1 + m) >= MIN_SAVED:
            chosen[id(node)] = (f"evaluated once into a temporary: {m} kernels read this value of {k} full-size "
                                f"arrays (recomputed in each, {m * k} array reads; once, {k + 1 + m} reads and writes)")
    marks = dict(chosen)
    todo = list(chosen)
    while todo:                 # the ancestors, so that the planner's walk reaches the chosen nodes
        for p in parents.get(todo.pop(), ()):
            if id(p) not in marks:
                marks[id(p)] = None
                todo.append(id(p))
    return marks


def _parents_first(roots) -> list:
    """Every Expr under roots, each after all the nodes that read it (a reversed post-order)."""
    post: list = []
    seen: set = set()
    for r in roots:
        stack = [(r, False)]
        while stack:
            node, done = stack.pop()
            if done:
                post.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((a, False) for a in node.args if type(a) is Expr)
    post.reverse()
    return post


def _elementwise(node, heavy_ops) -> bool:
    return type(node) is Expr and node.result is None and node.op not in heavy_ops and bool(node.args)


def _widening(node) -> bool:
    """An exact conversion to a wider dtype (float16 -> float32, say)."""
    if node.op != "astype":
        return False
    src, dst = node.args[0].dtype, node.dtype
    return dst.itemsize > src.itemsize and np.can_cast(src, dst, "safe")


def _full_size_arrays(node, heavy_ops) -> int:
    """The distinct arrays of node's size or more that its kernel region reads: tensors, and the
    results of heavy steps."""
    size = _size(node.shape)
    found: set = set()
    seen: set = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        for a in n.args:
            if type(a) is Const:
                continue
            if type(a) is Expr and _elementwise(a, heavy_ops):
                todo.append(a)
            elif _size(a.shape) >= size:
                found.add(id(a))
    return len(found)


def _size(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
