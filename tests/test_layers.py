"""The layers' import rules (pyproject.toml, [tool.importlinter]) hold.

The subpackages lazytensor.kernels and lazytensor.cbr live in the top-level folders kernels/ and
cbr/ (pyproject's package-dir), while import-linter reads a package from one folder; so the check
runs on a copy of the package laid out as it is installed.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_rules_hold(tmp_path):
    linter = Path(sys.executable).parent / "lint-imports"
    if not linter.exists():
        pytest.skip("import-linter is not installed (it comes with the test extra)")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "lazytensor", tmp_path / "lazytensor", ignore=skip)
    for sub in ("kernels", "cbr"):
        shutil.copytree(ROOT / sub, tmp_path / "lazytensor" / sub, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    run = subprocess.run([str(linter), "--no-cache", "--config", "pyproject.toml"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
