"""A CUDA backend over stand-in CuPy objects, for CPU-side tests of the host's side of a launch:
arrays are host memory (NumPy) with CuPy's attributes, the driver's cuLaunchKernel records the
kernelParams it is given (the bytes of each parameter, read through their addresses as the driver
does), and CuPy's Function call records the argument objects. Nothing is computed: a test reads
what would have been launched."""
from __future__ import annotations

import ctypes
import types

import numpy as np

from lazytensor.core.tensor import Tensor
from lazytensor.kernels import backend as backends
from lazytensor.kernels.backend import Backend
from lazytensor.kernels.cache import KernelCache
from lazytensor.kernels.cuda.backend import CudaBackend
from lazytensor.kernels.cuda.kernel import CudaKernel
from lazytensor.kernels.cuda.render_cuda import render_cuda
from lazytensor.assign import direct


class DriverError(Exception):
    """Stands in for cupy.cuda.driver.CUDADriverError."""


class MemoryPointer:
    __slots__ = ("ptr", "device_id", "mem")

    def __init__(self, ptr, mem):
        self.ptr, self.device_id, self.mem = ptr, 0, mem


class Flags:
    """CuPy's flags: no `aligned`, no `writeable`."""
    def __init__(self, c):
        self.c_contiguous, self.f_contiguous, self.owndata = c, False, True


class DeviceArray:
    """A CuPy ndarray's attributes over host memory (`host`, kept alive here)."""
    __slots__ = ("host", "data", "size", "shape", "strides", "dtype", "ndim", "_c_contiguous")

    def __init__(self, host: np.ndarray):
        self.host = host
        self.data = MemoryPointer(host.ctypes.data, host)
        self.size, self.shape, self.strides, self.dtype, self.ndim = host.size, host.shape, host.strides, host.dtype, host.ndim
        self._c_contiguous = host.flags.c_contiguous

    @property
    def flags(self):
        return Flags(self._c_contiguous)


class Launches(list):
    """What was launched: ("raw", function pointer, grid, block, stream, [bytes of each parameter])
    for the driver's call, ("cupy", function pointer, grid, block, args) for CuPy's."""
    fail = 0            # the next `fail` driver launches raise DriverError (no context on the thread)
    stream = 0


def _driver(launches: Launches, counts: dict):
    def launchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        assert (gy, gz, by, bz, shared, extra) == (1, 1, 1, 1, 0, 0)
        if launches.fail:
            launches.fail -= 1
            raise DriverError("CUDA_ERROR_INVALID_CONTEXT: invalid device context")
        slots = (ctypes.c_void_p * counts[f]).from_address(params)
        launches.append(("raw", f, gx, bx, stream, [ctypes.string_at(s, 8) for s in slots]))
    return launchKernel


class Function:
    def __init__(self, ptr, launches):
        self.ptr, self.launches = ptr, launches

    def __call__(self, grid, block, args):
        self.launches.append(("cupy", self.ptr, grid[0], block[0], list(args)))


def stand_in_backend(monkeypatch) -> tuple:
    """-> (the "cuda" backend over stand-ins, installed for this test; its Launches). The kernel
    parameter count the driver reads is the rendered kernel's, taken from its signature."""
    launches = Launches()
    counts = {}         # function pointer -> its kernel's parameter count
    stream = types.SimpleNamespace(ptr=0)
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(
        driver=types.SimpleNamespace(launchKernel=_driver(launches, counts), CUDADriverError=DriverError),
        get_current_stream=lambda: stream))
    backend = CudaBackend.__new__(CudaBackend)
    backend._cupy = cupy
    backend.kernels = KernelCache()
    backend._launches = {}
    backend._capture_streams = {}
    functions = {}

    def kernel(program, layout):
        rendered = render_cuda(program, layout)
        return backend.kernels.get_or_build((program, layout),
                                            lambda: CudaKernel(rendered, b"", None, "compiled", 0.0))

    def function(kernel, device_id):
        if kernel.name not in functions:
            functions[kernel.name] = Function(0x1000 + len(functions), launches)
            signature = kernel.source.split(kernel.name + "(", 1)[1].split(")", 1)[0]
            counts[functions[kernel.name].ptr] = signature.count(",") + 1
        return functions[kernel.name]
    monkeypatch.setattr(backend, "kernel", kernel)
    monkeypatch.setattr(backend, "_function", function)
    monkeypatch.setitem(backends._backends, "cuda", backend)
    monkeypatch.setattr(direct, "_known", {})       # (it keeps the backend of each expression it has seen)
    launches.stream = stream
    return backend, launches


def with_cuda_capabilities(**overrides):
    """A class decorator: the class declares what the CUDA backend declares (Backend.CAPABILITIES),
    but for `overrides`, so that a host-side stand-in takes the CUDA branches of the planning."""
    def declare(cls):
        for capability in Backend.CAPABILITIES:
            setattr(cls, capability, overrides.get(capability, getattr(CudaBackend, capability)))
        return cls
    return declare


def device_tensor(host: np.ndarray) -> Tensor:
    return Tensor(DeviceArray(host), "cuda")
