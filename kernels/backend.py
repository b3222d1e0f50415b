"""Backends are values with one small interface; the frontend picks one by device name.

    empty(shape, dtype)          a new uninitialised array on the device
    view(base, offset, shape, dtype, strides)
                                 an array over `base`'s memory from byte `offset` (plan recipes)
    asarray(obj, dtype)          an array on the device (no copy when obj already is one)
    to_host(array)               a NumPy copy
    run_elementwise(program, out, inputs, scalars, mask=None)
                                 render + compile (cached) + launch one fused kernel writing `out`
                                 (and, for a program with a ReLU mask, the packed bits into `mask`)
    run_flat(program, out, inputs, scalars)
                                 run_elementwise for operands known to be C-contiguous and aligned
                                 with out's shape (no mask): the caller has checked the layout. Backends whose
                                 bind_elementwise is None (the CPU); one that binds (CUDA) runs a
                                 step instead (lazytensor.assign.direct)
    explain_elementwise(program, out, inputs)
                                 the source and launch configuration that run_elementwise would use
    run_reduction(program, spec, out, inputs, scalars)
                                 one fused reduction (kernels.program.Reduction) of the program's values
    explain_reduction(program, spec, out, inputs)
    run_flat_reduction, flat_reduction_value
                                 (the CPU) a full reduction of operands known to be flat: into a 0-d
                                 `out`, or its value returned (None where it has none yet)
                                 (lazytensor.assign.host_scalar)
    synchronize()

Each backend subclasses Backend, which declares what a backend can do as class attributes (callers
ask these, never the backend's name, which is for display, explain's text and cache keys):

    host_memory      arrays are NumPy arrays in host memory (the NumPy library runs on them)
    graphs           capture(run) records the work run() enqueues as a CUDA graph
    streams          work is enqueued asynchronously on streams (a side stream may overlap it)
    cudnn            convolutions and batch-norm graphs may run in cuDNN
    cublas           matrix products may call cuBLAS (and cuBLASLt epilogues) directly
    cuda_kernels     the heavy steps' own kernels are generated CUDA C (kernels/cuda), not numba
    kernel_language  the language of the generated source explain shows ("numba", "CUDA C")

and the optional operations, with the base's defaults for a backend that has none:

    bind_elementwise             None, or a function binding a launch ahead (kernels/cuda/backend.py)
    reduction_scratch            None, or a function taking a split reduction's partial-result memory
    free_cached_memory()         give memory the backend keeps free back to the device (a no-op)
    memory_total()               the device's memory in bytes, or None where it cannot say
    current_device()             the id of the device work goes to (0)

The CUDA backend's `empty` raises kernels.cuda.device_memory.DeviceOutOfMemory (what, how many bytes)
when the GPU has no room.

CUDA imports (cupy) happen only when the "cuda" backend is first asked for, so the package imports
and runs on a machine with no GPU.
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
