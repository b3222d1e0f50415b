"""lt.explain(expr): the steps the planner returns for an expression, with their kernels' source."""
from __future__ import annotations

from lazytensor.reuse import recipes
from lazytensor.plan.planner import cheap_plan, plan
from lazytensor.plan.step_summary import step_lines
from lazytensor.assign.writes import readers_to_settle
from lazytensor.core.expr import Expr
from lazytensor.core.render_tree import render_tree
from lazytensor.core.tensor import Tensor
from lazytensor.tools.explanation_html import explanation_html


class Explanation(str):
    """The text of the plan (a str, so print() shows it as it is); `.steps` holds the step objects
    themselves, in the order they run. A notebook shows it as HTML: the steps as a table, then each
    kernel's program and highlighted source (lazytensor.tools.explanation_html)."""
    steps: list
    notes: list = []        # lines after the steps (the replay note)
    source: bool = True     # whether the text includes the generated source

    def _repr_html_(self) -> str:
        return explanation_html(self)

    def _repr_pretty_(self, printer, cycle):
        # IPython's terminal shows the text as print() does, not as a quoted str.
        printer.text(str(self))


def explain(expr, out: Tensor | str | None = None, source: bool = True, detail: bool | None = None) -> Explanation:
    """The plan of `expr` evaluated into `out` (a new tensor if None). A list of expressions, or of
    (destination, expression) pairs, explains lt.evaluate(e1, e2, ...) or lt.assign([...]). An
    object that plans itself (lt.train_step's step) explains its own plan.

    A plan of more than 20 steps prints its steps by kind, with their counts; `detail=True` (or
    `lt.explain(expr, "full")`) prints each step, `detail=False` (or "summary") always summarizes."""
    if isinstance(out, str):
        detail = _detail_of(out)
        out = None
    if hasattr(type(expr), "explanation"):
        text, steps, notes = expr.explanation(source, detail=detail)
        explanation = Explanation(text)
        explanation.steps, explanation.notes, explanation.source = steps, notes, source
        return explanation
    if isinstance(expr, (list, tuple)):
        from lazytensor.tools.explain_several import explain_several
        return explain_several(expr, source, explain, Explanation, detail)
    from lazytensor.assign.evaluate import _as_expression
    if out is None:
        from lazytensor.core.tensor import empty
        out = empty(expr.shape, expr.dtype, expr.device)
    node = _as_expression(expr, out)
    if type(node) is Expr:
        node.settle()               # as assignment does: nodes evaluated since it was built are read
        if node.result is not None:
            node = node.result      # evaluated: assigning it copies its result
    cache = _cache_note(node, out)     # looked up before this plan is kept
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
    lines.extend(step_lines(steps, source, detail))
    notes = [note for note in (cache, recipes.replay_note(node, out.data, out.backend, steps), _direct_note(node, out))
             if note is not None]
    lines.extend(notes)
    explanation = Explanation("\n".join(lines))
    explanation.steps = steps
    explanation.notes = notes
    explanation.source = source
    return explanation


def _detail_of(mode: str) -> bool:
    if mode not in ("full", "summary"):
        raise ValueError(f'lt.explain: the mode is "full" (each step) or "summary" (the steps by kind); got {mode!r}')
    return mode == "full"


def _direct_note(node, out):
    """Whether assigning `node` into `out` runs its one step through the direct path
    (lazytensor.assign.direct), or why not; None for what is not one elementwise expression."""
    if type(node) is not Expr or node.heavy:
        return None
    from lazytensor.assign.direct import direct_refusal
    why = direct_refusal(node, out)
    if why is None:
        return ("dispatch: direct (the step above, launched without planning: its program found by the "
                "expression's structure id, flat operands)")
    return f"dispatch: planned on every call ({why})"


def _cache_note(node, out):
    """Whether an assignment of the heavy `node` into `out` finds its plan kept (lazytensor.reuse.recipes)
    and, where it misses, what part of its structure differs from the nearest kept plan; None for
    what is not heavy (the direct note says how it dispatches)."""
    if type(node) is not Expr or not node.heavy:
        return None
    if cheap_plan(node, out.data, out.backend) is not None:
        return "plan cache: not needed (one step found by the expression's structure id, made without planning)"
    sig = recipes.signature(node, out.data)
    return recipes.cache_note(None if sig is None else sig[0])
