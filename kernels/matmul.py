"""Matrix products through the libraries: NumPy's matmul (BLAS) on the CPU, cupy.matmul (cuBLAS) on
CUDA. Knows arrays only; lazytensor.plan.matmul_plan decides when one runs."""
from __future__ import annotations

import numpy as np

from . import launch_log


def run_matmul(backend: str, a, b, out) -> None:
    """out[...] = a @ b, np.matmul's semantics; a, b and out share one dtype (the planner casts)."""
    if backend == "cpu":
        np.matmul(a, b, out=out)
    else:
        import cupy
        if a.ndim > 1 and b.ndim > 1:
            cupy.matmul(a, b, out=out)
        else:       # a vector operand: cupy.matmul's out= is for the matrix cases only (a small result)
            out[...] = cupy.matmul(a, b)
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord("matmul", backend, "matmul", int(out.size), "memory", 0.0,
                                                  "BLAS" if backend == "cpu" else "cuBLAS"))
