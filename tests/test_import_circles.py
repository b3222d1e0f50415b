"""No import circle among the modules of the IR, the planner, the tools, nor the cuDNN modules of lazytensor.cbr:
each module can be read, and imported, after the ones it imports (function-level imports count)."""
from __future__ import annotations

import pathlib

import pytest

grimp = pytest.importorskip("grimp")     # (it comes with import-linter, in the test extra)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _circles(package: str) -> list:
    top = package.split(".")[0]
    graph = grimp.build_graph(top, include_external_packages=False)
    # The package's __init__ imports everything: chains through it are not circles among the
    # modules checked.
    for imported in list(graph.find_modules_directly_imported_by(top)):
        graph.remove_import(importer=top, imported=imported)
    modules = {m for m in graph.modules if m == package or m.startswith(package + ".")}
    return sorted((m, other) for m in modules for other in graph.find_modules_directly_imported_by(m)
                  if other in modules and graph.chain_exists(importer=other, imported=m))


@pytest.mark.parametrize("package", ["lazytensor.core", "lazytensor.plan", "lazytensor.tools", "cbr"])   # cbr/ is lazytensor.cbr (package-dir)
def test_no_import_circle(package, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    assert _circles(package) == []
