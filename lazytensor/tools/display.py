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
import textwrap

from lazytensor.core.expr import Const, Expr
from lazytensor.core.tensor import Tensor
from lazytensor.core.render_tree import render_tree

_STYLE = ("<style>.lt-display table{border-collapse:collapse;margin:4px 0}"
          ".lt-display th,.lt-display td{border:1px solid #ccc;padding:2px 8px;text-align:left;"
          "vertical-align:top;font-family:monospace}"
          ".lt-display pre{margin:2px 0}</style>")


def html(x) -> str:
    """The HTML Jupyter shows for a Tensor or an Expr (their _repr_html_)."""
    if isinstance(x, Tensor):
        return tensor_html(x)
    return expr_html(x)


def tensor_html(t: Tensor) -> str:
    """The tensor's repr (its values as NumPy prints them, its dtype and device), as HTML."""
    return (f"<div class='lt-display'><pre>{_html.escape(repr(t))}</pre></div>")


def expr_html(expr: Expr) -> str:
    from lazytensor.tools.explain import explain
    info = _rows([("expression", render_tree(expr)), ("shape", str(expr.shape)), ("dtype", expr.dtype.name),
                  ("device", str(expr.device))])
    try:
        plan = explanation_html(explain(expr, source=False), header=False)
    except Exception as exc:   # noqa: BLE001 - a display must show, not raise: the plan's error is the news
        plan = f"<p>no plan: {_html.escape(type(exc).__name__)}: {_html.escape(str(exc))}</p>"
    return (f"{_STYLE}<div class='lt-display'><b>lazytensor Expr</b> (not evaluated)<table>{info}</table>"
            f"<details><summary>tree</summary><pre>{_html.escape(tree_text(expr))}</pre></details>"
            f"{plan}</div>")


def explanation_html(explanation, header: bool = True) -> str:
    """The steps of a plan as a table, then each step's program and generated source."""
    steps = explanation.steps
    rows = []
    details = []
    for i, step in enumerate(steps, 1):
        brief = step.describe(source=False)
        head, _, listing = brief.partition("\n")
        kind, _, what = head.partition(": ")
        rows.append(f"<tr><td>{i}</td><td>{_html.escape(kind)}</td><td>{_html.escape(what)}</td></tr>")
        body = f"<pre>{_html.escape(textwrap.dedent(listing))}</pre>" if listing.strip() else ""
        if explanation.source:
            full = step.describe(source=True)
            source = full[len(brief):] if full.startswith(brief) else ""
            if source.strip():
                body += _source_html(textwrap.dedent(source.strip("\n")), getattr(getattr(step, "backend", None),
                                                                                  "name", ""))
        if body:
            details.append(f"<details><summary>[{i}] {_html.escape(kind)}</summary>{body}</details>")
    lines = str(explanation).splitlines()
    top = ""
    if header:
        top = (f"{_STYLE}<div class='lt-display'><b>lt.explain</b>"
               f"<table>{_rows([tuple(line.split(': ', 1)) for line in lines[:2]])}</table>")
    table = (f"<p>plan: {len(steps)} step{'s' if len(steps) != 1 else ''}</p>"
             f"<table><tr><th>#</th><th>step</th><th>what it does</th></tr>{''.join(rows)}</table>")
    notes = "".join(f"<p>{_html.escape(n)}</p>" for n in explanation.notes)
    return top + table + "".join(details) + notes + ("</div>" if header else "")


def _rows(pairs) -> str:
    return "".join(f"<tr><th>{_html.escape(k)}</th><td>{_html.escape(v)}</td></tr>" for k, v in pairs)


def _source_html(text: str, backend: str) -> str:
    """A kernel's header line, then its source highlighted as Python (numba) or CUDA C."""
    title, _, code = text.partition("\n")
    out = f"<p>{_html.escape(title)}</p>"
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import CudaLexer, PythonLexer
    except ImportError:
        return out + f"<pre>{_html.escape(code)}</pre>"
    lexer = CudaLexer() if backend == "cuda" else PythonLexer()
    return out + highlight(code, lexer, HtmlFormatter(noclasses=True, nowrap=False))


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
