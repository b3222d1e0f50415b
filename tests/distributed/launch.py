"""Spawning `mpiexec -n N` from the tests, with a timeout so nothing hangs; skip without MPI."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def mpiexec() -> str:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py is not installed (the distributed extra)")
    here = Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.skip("no mpiexec (the mpich wheel of the distributed extra ships one)")
    return found


def run(n, args, timeout=240, env=None) -> subprocess.CompletedProcess:
    """`mpiexec -n n python args...`; the test fails (not hangs) past `timeout` seconds."""
    full = dict(os.environ, **(env or {}))
    return subprocess.run([mpiexec(), "-n", str(n), sys.executable] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout, env=full, cwd=HERE.parent.parent)
