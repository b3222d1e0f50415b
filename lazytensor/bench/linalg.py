"""`python -m lazytensor bench --device cuda --suite linalg`: lt.linalg against CuPy's own calls, on one
large matrix and a stack of small ones (float32), each call synchronized. CuPy is timed as called by
default (the factorization's status unread) and under cupyx.errstate(linalg="raise"), as lt.linalg
calls it so that a failure raises LinAlgError as NumPy does (a device-to-host read of the status)."""
from __future__ import annotations

import numpy as np

import lazytensor as lt
from lazytensor.bench.table import Table
from lazytensor.kernels.timing import time_host

CALLS = {
    "inv": (lambda cp, a: cp.linalg.inv(a), lambda x: lt.linalg.inv(x)),
    "cholesky": (lambda cp, a: cp.linalg.cholesky(a), lambda x: lt.linalg.cholesky(x)),
    "solve": (lambda cp, a: cp.linalg.solve(a, a), lambda x: lt.linalg.solve(x, x)),
    "det": (lambda cp, a: cp.linalg.det(a), lambda x: lt.linalg.det(x)),
    "eigh": (lambda cp, a: cp.linalg.eigh(a), lambda x: lt.linalg.eigh(x)),
    "qr": (lambda cp, a: cp.linalg.qr(a), lambda x: lt.linalg.qr(x)),
    "svd": (lambda cp, a: cp.linalg.svd(a, full_matrices=False), lambda x: lt.linalg.svd(x, full_matrices=False)),
}


def _spd(shape) -> np.ndarray:
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    n = shape[-1]
    return a @ np.swapaxes(a, -1, -2) + np.float32(n) * np.eye(n, dtype=np.float32)


def run_linalg_bench(print_fn=print) -> Table:
    import cupy
    import cupyx
    table = Table("lazytensor: lt.linalg against CuPy, CUDA float32, per synchronized call", "CuPy")

    def synced(f):
        def call():
            f()
            cupy.cuda.Device().synchronize()
        return call

    for shape in ((1024, 1024), (256, 32, 32)):
        data = cupy.asarray(_spd(shape))
        x = lt.Tensor(data, "cuda")
        for name, (theirs, ours) in CALLS.items():
            case = f"linalg.{name} {shape}"

            def run_ours(ours=ours):
                out = ours(x)
                lt.evaluate(*out) if isinstance(out, tuple) else lt.evaluate(out)

            def run_raising(theirs=theirs):
                with cupyx.errstate(linalg="raise"):
                    theirs(cupy, data)
            table.add(case, "lazytensor", time_host(synced(run_ours)))
            table.add(case, "CuPy", time_host(synced(lambda theirs=theirs: theirs(cupy, data))))
            table.add(case, "CuPy, errstate raise", time_host(synced(run_raising)))
    print_fn(table.render())
    return table
