"""lt.explain(expr): the steps the planner returns for an expression, with their kernels' source."""
from __future__ import annotations

from lazytensor.plan import recipes
from lazytensor.plan.planner import plan
from lazytensor.plan.writes import readers_to_settle
from lazytensor.core.expr import Expr
from lazytensor.core.render_tree import render_tree
from lazytensor.core.tensor import Tensor


class Explanation(str):
    """The text of the plan (a str, so print() and Jupyter show it as it is); `.steps` holds the
    step objects themselves, in the order they run."""
    steps: list


def explain(expr, out: Tensor | None = None, source: bool = True) -> Explanation:
    from lazytensor.plan.evaluate import _as_expression
    if out is None:
        from lazytensor.core.tensor import empty
        out = empty(expr.shape, expr.dtype, expr.device)
    node = _as_expression(expr, out)
    if type(node) is Expr:
        node.settle()               # as assignment does: nodes evaluated since it was built are read
        if node.result is not None:
            node = node.result      # evaluated: assigning it copies its result
    steps = plan(node, out.data, out.backend)
    lines = [f"expression: {render_tree(node)}",
             f"result: {out.dtype.name} {out.shape} on {out.device}"]
    first, _ = readers_to_settle(out, (node,))
    if first:
        lines.append(f"before the write: {len(first)} live expression{'s' if len(first) != 1 else ''} reading the "
                     f"destination's memory evaluated first, each into memory of its own (values stay values): "
                     + ", ".join(render_tree(n) for n in first))
    del first
    lines.append(f"plan: {len(steps)} step{'s' if len(steps) != 1 else ''}")
    for i, step in enumerate(steps, 1):
        lines.append(f"[{i}] " + step.describe(source=source))
    replay = recipes.replay_note(node, out.data, out.backend, steps)
    if replay is not None:
        lines.append(replay)
    explanation = Explanation("\n".join(lines))
    explanation.steps = steps
    return explanation
