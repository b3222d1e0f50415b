"""NumPy's BLAS on one thread for the length of a block: the CPU convolutions' GEMMs.

A training step on the CPU alternates numba's parallel kernels (OpenMP threads) with BLAS calls
(OpenBLAS's own threads). Both pools spin a while after each call, so on a machine with as many
cores as one pool has threads each BLAS call waits for cores the other pool holds: measured on 2
cores, a 75 MFLOP conv GEMM took 8 ms with OpenBLAS's 2 threads and 1.1 ms with one, and a
ResNet-18 step 500 ms against 107 ms (docs/design/training-step.md). The convolutions' GEMMs are
small (at most some 100 MFLOP), so one thread loses little where the cores are idle.

OpenBLAS only (NumPy's wheels bundle it), found among the libraries the process has loaded;
elsewhere (MKL, Accelerate, another OS) the block changes nothing.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools

_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads")


@functools.cache
def _openblas():
    """(get, set) of the loaded OpenBLAS's thread count, or None."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line})
    except OSError:
        return None
    libs = []
    for path in paths:
        try:
            libs.append(ctypes.CDLL(path))
        except OSError:
            continue
    # by symbol first: NumPy's wheels bundle the 64-bit-integer build (its names end in 64_); SciPy's
    # 32-bit one may be loaded beside it, and its library's name sorts first
    for setter in _SETTERS:
        getter = setter.replace("_set_", "_get_")
        for lib in libs:
            if hasattr(lib, setter) and hasattr(lib, getter):
                get, put = getattr(lib, getter), getattr(lib, setter)
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                return get, put
    return None


def blas_threads() -> int | None:
    """The loaded OpenBLAS's thread count now, or None where none is found."""
    found = _openblas()
    return None if found is None else found[0]()


@contextlib.contextmanager
def single_threaded_blas():
    """NumPy's matmuls inside the block run on the calling thread alone; the count is restored after."""
    found = _openblas()
    if found is None:
        yield
        return
    get, put = found
    before = get()
    if before == 1:
        yield
        return
    put(1)
    try:
        yield
    finally:
        put(before)
