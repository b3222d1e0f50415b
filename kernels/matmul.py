"""Matrix products through the libraries: NumPy's matmul (BLAS) on the CPU, cuBLAS GEMM on CUDA
(kernels/cublas_gemm.py; cupy.matmul for the cases it does not take). Knows arrays only; lazytensor.plan.matmul_plan decides when one runs."""
from __future__ import annotations

import numpy as np

from . import launch_log
from .cublas_gemm import run_gemm


def run_matmul(backend: str, a, b, out, gemm=None) -> None:
    """out[...] = a @ b, np.matmul's semantics; a, b and out share one dtype (the planner casts).
    gemm: on CUDA, cuBLAS's arguments for these arrays (lazytensor.kernels.cublas_gemm), which
    takes no memory during the call; None: cupy.matmul."""
    if backend == "cpu":
        np.matmul(a, b, out=out)
    elif gemm is not None:
        run_gemm(gemm, a, b, out)
    else:
        import cupy
        if a.ndim > 1 and b.ndim > 1:
            cupy.matmul(a, b, out=out)
        else:       # a vector operand: cupy.matmul's out= is for the matrix cases only (a small result)
            out[...] = cupy.matmul(a, b)
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord("matmul", backend, "matmul", int(out.size), "memory", 0.0,
                                                  "BLAS" if backend == "cpu" else "cuBLAS" if gemm is not None else "cupy.matmul"))
