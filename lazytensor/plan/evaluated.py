"""What a plan evaluated into temporaries, kept on its cutter (lazytensor.plan.planner) so that an
expression several heavy nodes read (a gradient both matmuls of a layer's backward read, an
activation the forward's matmul and a weight gradient's transposed view read) is evaluated once."""
from __future__ import annotations

from lazytensor.core import tensor as _tensor


def materialized(node, backend, steps, cut, shared=True) -> "_tensor.Tensor":
    """`node` (already cut: no heavy parts) as a Tensor, evaluating it into a temporary if needed;
    the steps that do are appended to `steps` and planned by `cut.plan`.
    shared: reuse what the plan evaluated already and keep what is evaluated here; False gives the
    caller a temporary of its own."""
    kept = evaluated_tensor(cut, node) if shared else (node if isinstance(node, _tensor.Tensor) else None)
    if isinstance(kept, _tensor.Tensor):
        return kept
    plan_steps = getattr(cut, "steps", None)
    if shared and plan_steps is not None and steps is not plan_steps:
        # Shared from here on, the temporary's writer goes into the plan now, after the caller's steps
        # so far: a reader that a later cut plans (the forward under a pooling's backward) comes after it.
        plan_steps.extend(steps)
        steps.clear()
        steps = plan_steps
    tmp = backend.empty(tuple(node.shape), node.dtype)
    new_steps = cut.plan(node, tmp, backend)
    steps.extend(new_steps)
    if shared:
        keep_evaluated(cut, node, tmp, new_steps[-1])
    return _tensor.Tensor(tmp, node.device)


def evaluated_tensor(cut, node):
    """`node` itself when it is a Tensor, the Tensor the plan evaluated it into, or None."""
    if isinstance(node, _tensor.Tensor):
        return node
    kept = getattr(cut, "evaluated", {}).get(id(node))
    return None if kept is None else kept[1]


def evaluating_step(cut, node):
    """The step that evaluated `node` into its temporary in this plan (see evaluated_tensor), or None."""
    kept = getattr(cut, "evaluated", {}).get(id(node))
    return None if kept is None else kept[2]


def keep_evaluated(cut, node, array, step) -> None:
    evaluated = getattr(cut, "evaluated", None)
    if evaluated is not None:       # the node is kept too: its id stays its own
        evaluated[id(node)] = (node, _tensor.Tensor(array, node.device), step)
