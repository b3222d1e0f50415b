"""Backends are values with one small interface; the frontend picks one by device name.

Design: docs/design/kernels.md, section "kernels/backend.py".
"""
from __future__ import annotations

import importlib.util
import os
import threading

_backends: dict = {}
_lock = threading.Lock()
_cuda_usable: bool | None = None


class Backend:
    """What every backend declares; the CPU and CUDA backends override what they have."""
    CAPABILITIES = ("host_memory", "graphs", "streams", "cudnn", "cublas", "cuda_kernels", "kernel_language")

    name = ""
    host_memory = False
    graphs = False
    streams = False
    cudnn = False
    cublas = False
    cuda_kernels = False
    kernel_language = ""
    segmented_sums = False      # run_segment_sums: per-segment sums of a flat array in one pass (ops.segments)

    bind_elementwise = None
    reduction_scratch = None

    def free_cached_memory(self) -> None:
        pass

    def memory_total(self) -> int | None:
        return None

    def current_device(self) -> int:
        return 0

    def capture(self, run):
        raise NotImplementedError(f"the {self.name} backend has no graphs")


def cuda_usable() -> bool:
    """CuPy is installed and sees at least one CUDA device."""
    global _cuda_usable
    if _cuda_usable is None:
        usable = False
        if importlib.util.find_spec("cupy") is not None:
            try:
                import cupy
                usable = cupy.cuda.runtime.getDeviceCount() > 0
            except Exception:  # no driver, no device: CPU only
                usable = False
        _cuda_usable = usable
    return _cuda_usable


def default_device() -> str:
    env = os.environ.get("LAZYTENSOR_DEVICE")
    if env:
        if env not in ("cpu", "cuda"):
            raise ValueError(f"LAZYTENSOR_DEVICE={env!r}: expected 'cpu' or 'cuda'")
        return env
    return "cuda" if cuda_usable() else "cpu"


def live_backends() -> list:
    """The backends made so far in this process."""
    return list(_backends.values())


def backend_for(device: str):
    backend = _backends.get(device)
    if backend is not None:
        return backend
    with _lock:
        if device not in _backends:
            if device == "cpu":
                from lazytensor.kernels.cpu.backend import CpuBackend
                _backends[device] = CpuBackend()
            elif device == "cuda":
                if not cuda_usable():
                    raise RuntimeError("device 'cuda' requested but CuPy with a CUDA device is not available; "
                                       "install the 'cuda' extra on a machine with an NVIDIA GPU, or use device='cpu'")
                from lazytensor.kernels.cuda.backend import CudaBackend
                _backends[device] = CudaBackend()
            else:
                raise ValueError(f"unknown device {device!r}: expected 'cpu' or 'cuda'")
    return _backends[device]
