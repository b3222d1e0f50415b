"""lt.explain_grad(output, inputs): what lt.grad builds for each input and the plan that runs it,
with what the reverse pass decided: where a gradient stops at an op without one (comparisons,
floor, casts to integers, where's condition), which tensors get no gradient work at all, and which
subgraphs a backward pattern took (the fused CBR backward) or why it did not."""
from __future__ import annotations

from lazytensor.autodiff.reverse import grad
from lazytensor.core.render_tree import render_tree
from lazytensor.core.tensor import Tensor, as_node
from lazytensor.tools.explain import Explanation, explain


def explain_grad(output, inputs, grad_output=None, source: bool = False, detail: bool | None = None) -> Explanation:
    """What lt.grad builds for each input and its plan; a gradient's plan of more than 20 steps
    prints its steps by kind unless detail=True (detail=False always summarizes)."""
    output = as_node(output)
    single = isinstance(inputs, Tensor)
    inputs = (inputs,) if single else tuple(inputs)
    gradients = grad(output, inputs, grad_output)
    names = _tensor_names(output)
    lines = [f"gradient of: {render_tree(output)}",
             "with respect to: " + ", ".join(f"inputs[{k}] = {names[id(x)]} {x.dtype.name} {x.shape}"
                                             for k, x in enumerate(inputs))]
    for t in gradients.untouched:
        if id(t) in names:
            lines.append(f"not differentiated: {names[id(t)]} {t.dtype.name} {t.shape}: not an input, "
                         f"so nothing is built or planned for its gradient")
    for node, i, why in gradients.stops:
        lines.append(f"no gradient: argument {i} of {_rendered(node)}: {why}")
    for node, what in gradients.paths:      # backward patterns taken, and why one was not
        lines.append(f"backward of {_rendered(node)}: {what}")
    steps = []
    for k, g in enumerate(gradients):
        e = explain(g, source=source, detail=detail)
        steps.extend(e.steps)
        lines.append(f"gradient with respect to inputs[{k}]:")
        lines.extend("  " + line for line in e.splitlines())
    explanation = Explanation("\n".join(lines))
    explanation.steps = steps
    return explanation


def _rendered(node) -> str:
    return "an expression nothing holds any more" if node is None else render_tree(node)


def _tensor_names(root) -> dict:
    """id(tensor) -> "t0", "t1", ... as render_tree names the tensors of `root` (first visit, left
    to right), and "the base of tN" for the tensors that views among them were made from."""
    names: dict = {}
    leaves = []
    seen: set = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Tensor):
            names[id(node)] = f"t{len(leaves)}"
            leaves.append(node)
        elif hasattr(node, "args"):
            stack.extend(reversed(node.args))
    for t in leaves:
        while t.view_of is not None and id(t.view_of[0]) not in names:
            names[id(t.view_of[0])] = f"the base of {names[id(t)]}"
            t = t.view_of[0]
    return names
