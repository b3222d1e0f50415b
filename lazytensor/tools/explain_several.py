"""lt.explain([e1, e2, ...]) and lt.explain([(dst, e), ...]): the plan of several results at once,
exactly the steps lt.evaluate(e1, e2, ...) and lt.assign([...]) run."""
from __future__ import annotations

from lazytensor.core.render_tree import render_tree
from lazytensor.core.tensor import Tensor, empty
from lazytensor.plan.several import plan_several
from lazytensor.plan.step_summary import step_lines
from lazytensor.reuse.several_recipes import recipe_note
from lazytensor.assign.simultaneous import checked_pairs, settled


def explain_several(items, source: bool, explain_one, explanation_type, detail=None):
    # lt.evaluate hands a Tensor back as it is, with no step: only expressions get a destination
    pairs = [item if isinstance(item, (tuple, list)) else (empty(item.shape, item.dtype, item.device), item)
             for item in items if isinstance(item, (tuple, list)) or not isinstance(item, Tensor)]
    pairs = [(dest, settled(node)) for dest, node in checked_pairs(pairs, "explain")]
    if len(pairs) == 1:       # one result is planned as `dst[...] = e`
        return explain_one(pairs[0][1], out=pairs[0][0], source=source, detail=detail)
    lines = [f"{len(pairs)} results at once: every read happens before any write"]
    for k, (dest, node) in enumerate(pairs):
        lines.append(f"result {k}: {dest.dtype.name} {dest.shape} on {dest.device} = {render_tree(node)}")
    by_device: dict = {}
    for dest, node in pairs:
        by_device.setdefault(dest.device, (dest.backend, []))[1].append((dest.data, node))
    steps = []
    for backend, group in by_device.values():
        steps += plan_several(group, backend)
    lines.append(f"plan: {len(steps)} step{'s' if len(steps) != 1 else ''}")
    lines.extend(step_lines(steps, source, detail))
    for backend, group in by_device.values():
        lines.append(recipe_note(group, backend, steps))
    explanation = explanation_type("\n".join(lines))
    explanation.steps = steps
    return explanation
