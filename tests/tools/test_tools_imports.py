"""The modules of lazytensor/tools import one another without a circle (a function-level import
counts: it is a circle all the same, only deferred)."""
from __future__ import annotations

import ast
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "lazytensor" / "tools"


def _imports(path: Path) -> set:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {n.rsplit(".", 1)[-1] for n in names if n.startswith("lazytensor.tools.")}
    return found


def test_no_tools_module_reaches_itself_through_its_imports():
    graph = {p.stem: _imports(p) for p in TOOLS.glob("*.py")}
    for start in graph:
        seen, todo = set(), [(name, start) for name in graph[start]]
        while todo:
            name, via = todo.pop()
            assert name != start, f"lazytensor.tools.{start} reaches lazytensor.tools.{via}, which imports it back"
            if name not in seen:
                seen.add(name)
                todo += [(after, name) for after in graph.get(name, ())]
