"""Rich display in Jupyter: the HTML of expressions, tensors and lt.explain's plans.

What each display evaluates: nothing, except a tensor's own values.
- An expression shows its tree, shape, dtype, device and its plan (the steps lt.explain prints,
  with each kernel's program). Planning runs no step: nothing is launched, compiled or computed.
- lt.explain(...) shows its steps as a table and the generated source, highlighted by pygments
  where it is installed (else plain <pre>). Rendering that source is what lt.explain itself did.
- A tensor shows its values as NumPy prints them, with its device: reading them is a
  device-to-host copy on CUDA.
"""
from __future__ import annotations

import html as _html

from lazytensor.core.expr import Const, Expr
from lazytensor.core.tensor import Tensor
from lazytensor.core.render_tree import render_tree
from lazytensor.tools.explain import explain
from lazytensor.tools.explanation_html import STYLE, explanation_html, table_rows


def html(x) -> str:
    """The HTML Jupyter shows for a Tensor or an Expr (their _repr_html_)."""
    if isinstance(x, Tensor):
        return tensor_html(x)
    return expr_html(x)


def tensor_html(t: Tensor) -> str:
    """The tensor's repr (its values as NumPy prints them, its dtype and device), as HTML."""
    return (f"<div class='lt-display'><pre>{_html.escape(repr(t))}</pre></div>")


def expr_html(expr: Expr) -> str:
    info = table_rows([("expression", render_tree(expr)), ("shape", str(expr.shape)), ("dtype", expr.dtype.name),
                        ("device", str(expr.device))])
    try:
        plan = explanation_html(explain(expr, source=False), header=False)
    except Exception as exc:   # noqa: BLE001 - a display must show, not raise: the plan's error is the news
        plan = f"<p>no plan: {_html.escape(type(exc).__name__)}: {_html.escape(str(exc))}</p>"
    return (f"{STYLE}<div class='lt-display'><b>lazytensor Expr</b> (not evaluated)<table>{info}</table>"
            f"<details><summary>tree</summary><pre>{_html.escape(tree_text(expr))}</pre></details>"
            f"{plan}</div>")


def tree_text(root) -> str:
    """The expression as an indented tree, one node a line with its dtype and shape; a node used
    again is named by its first line's number instead of repeated."""
    lines: list = []
    seen: dict = {}
    names: dict = {}

    def walk(node, depth):
        pad = "  " * depth
        if isinstance(node, Const):
            lines.append(f"{pad}{node.value!r} ({node.dtype.name} scalar)")
            return
        if not isinstance(node, Expr):
            name = names.setdefault(id(node), f"t{len(names)}")
            lines.append(f"{pad}{name}: tensor {node.dtype.name} {node.shape} on {node.device}")
            return
        if id(node) in seen:
            lines.append(f"{pad}(node {seen[id(node)]}, again)")
            return
        seen[id(node)] = len(lines) + 1
        label = node.op if node.op != "astype" else f"astype({node.dtype.name})"
        lines.append(f"{pad}[{len(lines) + 1}] {label} -> {node.dtype.name} {node.shape}")
        for a in node.args:
            walk(a, depth + 1)

    walk(root, 0)
    return "\n".join(lines)
