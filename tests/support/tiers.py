"""Running a test's calls in one tier or the other: the interpreter tier forced (LAZYTENSOR_TIER,
a fresh kernel cache: nothing compiled, nothing compiles), or the compiled kernels (the suite's
LAZYTENSOR_JIT_WAIT=1)."""
from __future__ import annotations

import contextlib
import os

from lazytensor.kernels.backend import backend_for
from lazytensor.kernels.cache import KernelCache


@contextlib.contextmanager
def interpreter_tier():
    backend = backend_for("cpu")
    saved = os.environ.get("LAZYTENSOR_TIER"), backend.kernels
    os.environ["LAZYTENSOR_TIER"] = "interpreter"
    backend.kernels = KernelCache()
    try:
        yield backend
    finally:
        backend.kernels = saved[1]
        if saved[0] is None:
            del os.environ["LAZYTENSOR_TIER"]
        else:
            os.environ["LAZYTENSOR_TIER"] = saved[0]


@contextlib.contextmanager
def compiled_tier():
    saved = os.environ.get("LAZYTENSOR_TIER"), os.environ.get("LAZYTENSOR_JIT_WAIT")
    os.environ.pop("LAZYTENSOR_TIER", None)
    os.environ["LAZYTENSOR_JIT_WAIT"] = "1"
    try:
        yield
    finally:
        for name, value in zip(("LAZYTENSOR_TIER", "LAZYTENSOR_JIT_WAIT"), saved):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def in_both_tiers(f):
    """(f() in the interpreter tier, f() on the compiled kernels)."""
    with interpreter_tier():
        interpreted = f()
    with compiled_tier():
        compiled = f()
    return interpreted, compiled
