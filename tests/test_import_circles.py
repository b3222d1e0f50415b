"""No import circle among the planner's modules, nor among the cuDNN modules of lazytensor.cbr:
each module can be read, and imported, after the ones it imports (function-level imports count)."""
from __future__ import annotations

import pathlib

import grimp
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _circles(package: str) -> list:
    top = package.split(".")[0]
    graph = grimp.build_graph(top, include_external_packages=False)
    # core.upward is the one sanctioned upward door (pyproject's ignore_imports), and the package's
    # __init__ imports everything: chains through them are not circles among the modules checked.
    for door in ("lazytensor.core.upward", "lazytensor"):
        if door in graph.modules:
            for imported in list(graph.find_modules_directly_imported_by(door)):
                graph.remove_import(importer=door, imported=imported)
    modules = {m for m in graph.modules if m == package or m.startswith(package + ".")}
    return sorted((m, other) for m in modules for other in graph.find_modules_directly_imported_by(m)
                  if other in modules and graph.chain_exists(importer=other, imported=m))


@pytest.mark.parametrize("package", ["lazytensor.plan", "cbr"])   # cbr/ is lazytensor.cbr (package-dir)
def test_no_import_circle(package, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    assert _circles(package) == []
