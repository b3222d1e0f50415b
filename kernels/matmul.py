"""Matrix products through the libraries: NumPy's matmul (BLAS) on the CPU, cuBLAS GEMM on CUDA
(kernels/cuda/cublas_gemm.py; cupy.matmul for the cases it does not take). Knows arrays only; lazytensor.plan.heavy.matmul decides when one runs."""
from __future__ import annotations

import numpy as np

from lazytensor.kernels import launch_log
from lazytensor.kernels.cuda.cublas_gemm import run_gemm
from lazytensor.kernels.ops import BFLOAT16

# kernels/cpu/matmul_f16.py's threshold, here so that importing this module does not import numba.
FLOAT16_KERNEL_MIN_WORK = 1 << 28


def cpu_float16_kernel(a, b) -> bool:
    """Whether a float16 product on the CPU runs in kernels/cpu/matmul_f16.py (NumPy's numbers, fast)
    rather than in NumPy's own float16 loop (small products, where a first compile would cost more)."""
    if a.dtype != np.float16:
        return False
    n = a.shape[-2] if a.ndim > 1 else 1
    m = b.shape[-1] if b.ndim > 1 else 1
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return int(np.prod(batch, dtype=np.int64)) * n * a.shape[-1] * m >= FLOAT16_KERNEL_MIN_WORK


def run_matmul(backend, a, b, out, gemm=None) -> None:
    """out[...] = a @ b, np.matmul's semantics; a, b and out share one dtype (the planner casts);
    `backend` is the arrays' (kernels.backend.Backend).
    gemm: on CUDA, cuBLAS's arguments for these arrays (lazytensor.kernels.cuda.cublas_gemm), which
    takes no memory during the call; None: cupy.matmul."""
    host = backend.host_memory
    float16_kernel = host and cpu_float16_kernel(a, b)
    if float16_kernel:
        from lazytensor.kernels.cpu.numba_import import import_numba
        import_numba()
        from lazytensor.kernels.cpu.matmul_f16 import matmul_f16     # numba, imported on first use
        matmul_f16(a, b, out)
    elif host and out.dtype == BFLOAT16:
        # BLAS in float32 (exact products of bfloat16 values), rounded once to bfloat16: as cuBLAS
        # computes a bfloat16 GEMM, and np.matmul with ml_dtypes (whose float32 result we round)
        out[...] = np.matmul(a.astype(np.float32), b.astype(np.float32))
    elif host:
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
        launch_log.record(launch_log.KernelRecord("matmul", backend.name, "matmul", int(out.size), "memory", 0.0,
                                                  "float16 kernel" if float16_kernel else "BLAS" if host else "cuBLAS" if gemm is not None else "cupy.matmul"))
