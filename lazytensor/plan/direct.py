"""`y[...] = e` for an elementwise `e` over flat operands: the planner's one step, without the planner.

The planner makes a plan of ONE FusedElementwise step for an elementwise expression, and when
  - every tensor `e` reads is C-contiguous and has the destination's shape,
  - no tensor is read twice and no node is used twice (`e` is a tree over distinct leaves),
  - no tensor shares memory with the destination (or is the destination's own array),
that step is always the same: the program found by e's structure id (lower's common case, one
dict lookup) over the leaves' arrays in order and e's scalars, with flat indexing. This module
checks exactly these conditions on every call and hands the kernel launch to the backend's
`run_flat`, skipping the plan, the step object and the layout tests: on small arrays those cost
several times what the kernel does (issue 16, part 2). Anything else returns False and is planned.
lt.explain says whether an assignment takes this path and, if not, which condition failed.
"""
from __future__ import annotations

from lazytensor.core.memory import owner
from lazytensor.plan.lower import tree_program


def flat_of(t) -> tuple:
    """(id of the owner of t's allocation, whether t's array is C-contiguous) of a Tensor, read once
    and kept on it: a Tensor never changes the memory it views."""
    flat = t.flat
    if flat is None:
        a = t.data
        flat = t.flat = (id(owner(a)), bool(a.flags.c_contiguous))
    return flat


def assign(node, dest) -> bool:
    """dest[...] = node on the direct path; False, with nothing done, where the conditions above do
    not hold. The caller has checked node's dtype, shape and device against dest's, and that dest is
    writable; node is an unevaluated elementwise Expr."""
    if direct_refusal(node, dest) is not None:
        return False
    dest.backend.run_flat(tree_program(node, dest.dtype), dest.data, [t.data for t in node.leaves],
                          node.scalars)
    return True


def direct_refusal(node, dest):
    """None where `dest[...] = node` takes the direct path, else why not (for lt.explain). Kept to
    a handful of comparisons per tensor: this runs on every assignment."""
    if node.shared:
        return "a node is used twice (the program is found by a walk of the DAG)"
    shape = dest.shape
    if node.shape != shape:
        return "the expression broadcasts to the destination"
    own, contiguous = dest.flat or flat_of(dest)
    if not contiguous:
        return "the destination is not C-contiguous"
    leaves = node.leaves
    data = dest.data
    for t in leaves:
        if t.shape != shape:
            return "a tensor is broadcast"
        t_own, contiguous = t.flat or flat_of(t)
        if not contiguous:
            return "a tensor is not C-contiguous"
        if t_own == own and t.data is not data:
            return "a tensor shares memory with the destination"
    if len(leaves) > 1 and len(set(leaves)) != len(leaves):
        return "a tensor is read twice (the program is found by a walk of the DAG)"
    return None
