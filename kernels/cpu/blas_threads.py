"""NumPy's BLAS on one thread for the length of a block: the CPU convolutions' GEMMs.

A training step on the CPU alternates numba's parallel kernels (OpenMP threads) with BLAS calls
(OpenBLAS's own threads). Both pools spin a while after each call, so on a machine with as many
cores as one pool has threads each BLAS call waits for cores the other pool holds: measured on 2
cores, a 75 MFLOP conv GEMM took 8 ms with OpenBLAS's 2 threads and 1.1 ms with one, and a
ResNet-18 step 500 ms against 107 ms (docs/design/training-step.md). The convolutions' GEMMs are
small (at most some 100 MFLOP), so one thread loses little where the cores are idle.

threadpoolctl finds the BLAS libraries the process has loaded (OpenBLAS, which NumPy's wheels
bundle, MKL, BLIS) and sets their thread counts; where it is not installed the block changes nothing.
"""
from __future__ import annotations

import contextlib
import functools


@functools.cache
def _controller():
    """threadpoolctl's controller of the loaded BLAS libraries, made once (it inspects the process's
    libraries), or None where threadpoolctl is not installed or no BLAS is loaded."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    blas = ThreadpoolController().select(user_api="blas")
    return blas if blas.lib_controllers else None


def blas_threads() -> int | None:
    """The loaded BLAS's thread count now (the largest, where several are loaded), or None."""
    blas = _controller()
    return None if blas is None else max(lib.num_threads for lib in blas.lib_controllers)


@contextlib.contextmanager
def single_threaded_blas():
    """NumPy's matmuls inside the block run on the calling thread alone; the count is restored after."""
    blas = _controller()
    if blas is None:
        yield
        return
    with blas.limit(limits=1):
        yield
