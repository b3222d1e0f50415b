"""Discrete Fourier transforms on arrays: NumPy's pocketfft on the CPU, cuFFT through cupy.fft on CUDA.
Knows arrays only; lazytensor.plan.heavy.fft decides when one runs."""
from __future__ import annotations

import numpy as np

from lazytensor.kernels import launch_log

# fn -> whether it takes one axis (n=, axis=) rather than several (s=, axes=)
ONE_AXIS = {"fft": True, "ifft": True, "rfft": True, "irfft": True, "hfft": True, "ihfft": True,
            "fftn": False, "ifftn": False, "rfftn": False, "irfftn": False}


def call_fft(xp, fn: str, params: tuple, a):
    """xp.fft.<fn>(a, ...) for xp NumPy or CuPy; params: (n, axis, norm) or (s, axes, norm)."""
    size, axes, norm = params
    f = getattr(xp.fft, fn)
    if ONE_AXIS[fn]:
        return f(a, n=size, axis=axes, norm=norm)
    return f(a, s=size, axes=axes, norm=norm)


def run_fft(backend, fn: str, params: tuple, a, out) -> None:
    """out[...] = the transform `fn` of `a` (an array of `backend`); out has the transform's shape and dtype."""
    if backend.host_memory:
        out[...] = call_fft(np, fn, params, a)
    elif a.size == 0 or out.size == 0:
        out[...] = backend.asarray(call_fft(np, fn, params, np.empty(a.shape, a.dtype)))
    else:
        import cupy
        out[...] = call_fft(cupy, fn, params, a)
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord(f"fft.{fn}", backend.name, "fft", int(out.size), "memory", 0.0,
                                                  "pocketfft (NumPy)" if backend.host_memory else "cuFFT (CuPy)"))
