"""Every notebook in notebooks/ runs top to bottom without a cell error (on the CPU in CI)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
kernelspec = pytest.importorskip("jupyter_client.kernelspec")

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 300


@pytest.fixture
def jupyter_env(tmp_path, monkeypatch):
    """This venv's kernelspecs first (ipykernel installs `python3` under sys.prefix/share/jupyter;
    its argv "python" is replaced by sys.executable, so the kernel is this interpreter), a fresh
    kernel cache folder, and the default mode a user's notebook runs in: without the suite's
    LAZYTENSOR_JIT_WAIT, so first calls take the interpreter tier while their kernels compile."""
    paths = [str(Path(sys.prefix) / "share" / "jupyter"), os.environ.get("JUPYTER_PATH", "")]
    monkeypatch.setenv("JUPYTER_PATH", os.pathsep.join(p for p in paths if p))
    monkeypatch.setenv("LAZYTENSOR_CACHE_DIR", str(tmp_path / "lazytensor-cache"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("LAZYTENSOR_JIT_WAIT", raising=False)
    monkeypatch.delenv("LAZYTENSOR_TIER", raising=False)
    try:
        kernelspec.KernelSpecManager().get_kernel_spec("python3")
    except kernelspec.NoSuchKernel:
        pytest.fail(f"no 'python3' Jupyter kernel found for {sys.executable}: install ipykernel in this "
                    f"environment (pip install -e '.[test]')")


def test_notebooks_exist():
    assert NOTEBOOKS, "notebooks/ holds no .ipynb file"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_cells_have_unique_ids(path):
    """nbformat 4.5 requires cell ids; a missing one is a warning now and an error in later nbformat."""
    ids = [cell.get("id") for cell in json.loads(path.read_text())["cells"]]
    assert None not in ids, f"{path.name}: cells {[i for i, c in enumerate(ids) if c is None]} have no id"
    assert len(set(ids)) == len(ids), f"{path.name}: repeated cell ids"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, jupyter_env):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()   # raises CellExecutionError, naming the failing cell and its traceback
    _check_displays(path, nb)


# A cell tagged with one of these must have shown an output of that MIME type.
DISPLAY_TAGS = {"display-html": "text/html", "display-image": "image/png"}


def _check_displays(path, nb):
    """Rich displays exist where the notebook promises them (cells tagged display-html, display-image)."""
    for i, cell in enumerate(nb.cells):
        for tag in cell.get("metadata", {}).get("tags", []):
            if tag in DISPLAY_TAGS:
                shown = [kind for out in cell.get("outputs", []) for kind in out.get("data", {})]
                assert DISPLAY_TAGS[tag] in shown, f"{path.name}, cell {i}: tagged {tag} but showed only {shown}"
