"""`python -m lazytensor demo`: the main job in one screen. Build an expression, read its plan,
run it as one fused kernel, check it against NumPy, and time both."""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import asarray, empty_like
from lazytensor.kernels.backend import default_device
from lazytensor.ops.elementwise import relu
from lazytensor.tools.explain import explain
from lazytensor.tools.profile import profile
from lazytensor.kernels.timing import time_host


def run_demo(device=None) -> None:
    device = device or default_device()
    rng = np.random.default_rng(0)
    n = 1 << 22
    host = [rng.standard_normal(n, dtype=np.float32) for _ in range(4)]
    a, b, c, d = (asarray(x, device=device) for x in host)
    print(f"lazytensor demo on {device!r}: four float32 vectors of {n} elements\n")

    e = relu((a + b) * c + 5 * d)
    print("e = lt.relu((a + b) * c + 5 * d)     # builds a tree, computes nothing")
    print(repr(e), "\n")
    print("lt.explain(e, source=False):")
    print(explain(e, source=False), "\n")

    y = empty_like(a)
    with profile() as p:
        y[...] = e
    print("y[...] = e   # first assignment: compile (or load from the disk cache) and run")
    print(p, "\n")
    with profile() as p:
        y[...] = e
    print("y[...] = e   # again: a memory cache hit, one launch")
    print(p, "\n")

    x0, x1, x2, x3 = host
    ref = np.maximum((x0 + x1) * x2 + 5 * x3, 0)
    err = float(np.max(np.abs(y.numpy() - ref)))
    print(f"max |lazytensor - NumPy| = {err:.3g}")
    sync = y.backend.synchronize

    def fused():
        y[...] = relu((a + b) * c + 5 * d)
        sync()

    t_lt = time_host(fused, repeat=9)
    t_np = time_host(lambda: np.maximum((x0 + x1) * x2 + 5 * x3, 0), repeat=5)
    print(f"lazytensor {t_lt * 1e3:.2f} ms, NumPy eager {t_np * 1e3:.2f} ms: {t_np / t_lt:.1f}x")
    if err > 1e-5:
        raise SystemExit("demo: lazytensor disagrees with NumPy")
