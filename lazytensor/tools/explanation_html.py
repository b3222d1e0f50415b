"""lt.explain's plan as HTML (a notebook's display of an Explanation, and of an expression's plan):
the steps as a table, then each step's program and generated source, highlighted by pygments where
it is installed (else plain <pre>)."""
from __future__ import annotations

import html as _html
import textwrap

STYLE = ("<style>.lt-display table{border-collapse:collapse;margin:4px 0}"
         ".lt-display th,.lt-display td{border:1px solid #ccc;padding:2px 8px;text-align:left;"
          "vertical-align:top;font-family:monospace}"
         ".lt-display pre{margin:2px 0}</style>")


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
                backend = getattr(step, "backend", None)        # (a step that launches nothing has none)
                language = "" if backend is None else backend.kernel_language
                body += source_html(textwrap.dedent(source.strip("\n")), language)
        if body:
            details.append(f"<details><summary>[{i}] {_html.escape(kind)}</summary>{body}</details>")
    lines = str(explanation).splitlines()
    top = ""
    if header:
        top = (f"{STYLE}<div class='lt-display'><b>lt.explain</b>"
               f"<table>{table_rows([tuple(line.split(': ', 1)) for line in lines[:2]])}</table>")
    table = (f"<p>plan: {len(steps)} step{'s' if len(steps) != 1 else ''}</p>"
             f"<table><tr><th>#</th><th>step</th><th>what it does</th></tr>{''.join(rows)}</table>")
    notes = "".join(f"<p>{_html.escape(n)}</p>" for n in explanation.notes)
    return top + table + "".join(details) + notes + ("</div>" if header else "")


def table_rows(pairs) -> str:
    return "".join(f"<tr><th>{_html.escape(k)}</th><td>{_html.escape(v)}</td></tr>" for k, v in pairs)


def source_html(text: str, language: str) -> str:
    """A kernel's header line, then its source highlighted as Python (numba) or CUDA C."""
    title, _, code = text.partition("\n")
    out = f"<p>{_html.escape(title)}</p>"
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import CudaLexer, PythonLexer
    except ImportError:
        return out + f"<pre>{_html.escape(code)}</pre>"
    lexer = CudaLexer() if language == "CUDA C" else PythonLexer()
    return out + highlight(code, lexer, HtmlFormatter(noclasses=True, nowrap=False))
