"""A compiled CUDA kernel (source, cubin, loaded functions) and how scalars reach its arguments:
what the elementwise backend (backend.py) and the reductions (reduce.py) share."""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.ops import BFLOAT16
from lazytensor.kernels.program import ElementwiseProgram
from lazytensor.kernels.cuda.raw_launch import scalar_arguments  # noqa: F401 (the launchers' import)
from lazytensor.kernels.cuda.render_cuda import CudaSource

_F16 = np.dtype(np.float16)


def _float16_argument(value):
    """float16 scalars travel as float32 kernel arguments, rounded to float16 first."""
    return np.float32(np.float16(value))


def _bfloat16_argument(value):
    """bfloat16 scalars travel as float32 kernel arguments, rounded to bfloat16 first."""
    return np.float32(BFLOAT16.type(value))


def _complex_argument(part_type):
    """complex scalars travel as two kernel arguments, the parts (render_cuda.scalar_parameters)."""
    def convert(value):
        z = complex(value)
        return part_type(z.real), part_type(z.imag)
    return convert


_COMPLEX_ARGUMENTS = {np.dtype(np.complex64): _complex_argument(np.float32),
                      np.dtype(np.complex128): _complex_argument(np.float64)}


def scalar_converters(program: ElementwiseProgram) -> tuple:
    """One function per scalar: its value as the kernel's argument, or, for a complex scalar, a pair of
    arguments (scalar_arguments flattens them)."""
    return tuple(_float16_argument if np.dtype(d) == _F16 else _bfloat16_argument if np.dtype(d) == BFLOAT16
                 else _COMPLEX_ARGUMENTS.get(np.dtype(d), np.dtype(d).type) for d in program.scalar_dtypes)


class CudaKernel:
    """A compiled kernel: its source and cubin, loaded once per device."""
    __slots__ = ("rendered", "cubin", "path", "cache", "compile_seconds", "functions")

    def __init__(self, rendered: CudaSource, cubin, path, cache, compile_seconds):
        self.rendered, self.cubin, self.path = rendered, cubin, path
        self.cache, self.compile_seconds = cache, compile_seconds   # how it was first obtained
        self.functions = {}                                         # device id -> cupy Function

    name = property(lambda self: self.rendered.name)
    source = property(lambda self: self.rendered.source)
