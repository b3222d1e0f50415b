"""Kernel launches through the driver's cuLaunchKernel, their parameters packed in place.

Design: docs/design/cuda-kernels.md, section "kernels/cuda/raw_launch.py".
"""
from __future__ import annotations

import ctypes
import struct
from threading import get_ident

import numpy as np

from lazytensor.kernels.ops import BFLOAT16

SLOT = 8                 # bytes per parameter slot
POINTER = "Q"            # a device pointer

# The struct codes of the kernels' scalar parameter types (render_cuda.EXACT: float16 and bfloat16
# scalars are passed as float, rounded first by kernels/cuda/kernel.py's converters), standard sizes.
CODES = {np.dtype(name): code for name, code in {
    "bool": "?", "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint8": "B", "uint16": "H",
    "uint32": "I", "uint64": "Q", "float16": "f", "float32": "f", "float64": "d"}.items()}
CODES[BFLOAT16] = "f"
CODES[np.dtype(np.complex64)] = "ff"         # (two parameters: the parts, render_cuda.scalar_parameters)
CODES[np.dtype(np.complex128)] = "dd"
INDEX_CODES = {False: "i", True: "q"}     # the geometry's integers: int, or long long (64-bit indexing)


def scalar_arguments(converters, scalars) -> list:
    """The kernel arguments of `scalars`: each converted, a complex one's two parts in order."""
    out = []
    for convert, value in zip(converters, scalars):
        v = convert(value)
        if type(v) is tuple:
            out += v
        else:
            out.append(v)
    return out


def slot_struct(codes: str) -> struct.Struct:
    """A Struct that writes one value per code at the start of its own 8-byte slot, little-endian."""
    return struct.Struct("<" + "".join(code + "x" * (SLOT - struct.calcsize("<" + code)) for code in codes))


class KernelParameters:
    """One slot per kernel parameter and the `void*[]` of their addresses (`address`, for
    cuLaunchKernel). The first len(codes) slots are written by `pack(slots, 0, *values)` on each
    call; `fixed` values (of `fixed_codes`) follow them, written once here."""
    __slots__ = ("slots", "pointers", "address", "pack")

    def __init__(self, codes: str, fixed_codes: str = "", fixed: tuple = ()):
        count = len(codes) + len(fixed_codes)
        self.slots = (ctypes.c_uint64 * count)()
        base = ctypes.addressof(self.slots)
        self.pointers = (ctypes.c_void_p * count)(*[base + SLOT * k for k in range(count)])
        self.address = ctypes.addressof(self.pointers)
        self.pack = slot_struct(codes).pack_into
        slot_struct(fixed_codes).pack_into(self.slots, SLOT * len(codes), *fixed)


class RawLaunch:
    """A launch plan's kernel function, grid and block, and its parameters: `n_pointers` device
    pointers, then the scalars of `scalar_dtypes`, then the geometry's integers `tail` (int, or long
    long with 64-bit indexing). run() launches with the given pointers and scalars on the current
    stream; launch() with parameters written before (bound()).

    The slots belong to the thread that made the plan: cuLaunchKernel runs with the GIL released, and
    another thread writing the slots meanwhile would change the arguments of a launch under way. A
    call from another thread returns False, launching nothing, and so does a launch the driver
    refuses (a thread without a current context, which CuPy's call makes current; or a real error,
    which CuPy's call raises again): the caller then launches through CuPy's call."""
    __slots__ = ("function", "grid", "block", "params", "codes", "tail", "converters", "convert", "thread",
                 "launch_kernel", "driver_error", "current_stream")

    def __init__(self, function_ptr: int, grid: int, block: int, n_pointers: int, scalar_dtypes, converters,
                 index64: bool, tail: tuple, cupy):
        self.function, self.grid, self.block = function_ptr, grid, block
        self.codes = POINTER * n_pointers + "".join(CODES[np.dtype(d)] for d in scalar_dtypes)
        self.tail = INDEX_CODES[index64] * len(tail), tuple(tail)
        self.params = KernelParameters(self.codes, *self.tail)
        self.converters = converters
        # float16 scalars are rounded to float16 before they travel as float, complex ones split in
        # their parts: always converted.
        self.convert = any(np.dtype(d) == np.float16 or np.dtype(d) == BFLOAT16 or np.dtype(d).kind == "c"
                           for d in scalar_dtypes)
        self.thread = get_ident()
        self.launch_kernel = cupy.cuda.driver.launchKernel
        self.driver_error = cupy.cuda.driver.CUDADriverError
        self.current_stream = cupy.cuda.get_current_stream

    def converted(self, scalars) -> list:
        """The scalars as CuPy's call is given them (kernels/cuda/kernel.scalar_converters)."""
        return scalar_arguments(self.converters, scalars)

    def run(self, pointers, scalars) -> bool:
        """Launch with these device pointers and scalars on the current stream; False, with nothing
        launched, from another thread or where the driver refuses."""
        if get_ident() != self.thread:
            return False
        params = self.params
        if self.convert:
            scalars = self.converted(scalars)
        try:
            params.pack(params.slots, 0, *pointers, *scalars)
        except (struct.error, OverflowError):
            # What struct refuses and NumPy's conversion takes: a finite double beyond float32's range
            # (NumPy makes it inf, with its overflow warning), a float for an integer parameter.
            params.pack(params.slots, 0, *pointers, *self.converted(scalars))
        return self.launch(params)

    def launch(self, params: KernelParameters) -> bool:
        """Launch with these parameters on the current stream; False where the driver refuses."""
        try:
            self.launch_kernel(self.function, self.grid, 1, 1, self.block, 1, 1, 0, self.current_stream().ptr,
                               params.address, 0)
        except self.driver_error:
            return False
        return True

    def bound(self, pointers, scalars) -> KernelParameters:
        """Parameters with every value written: for a launch whose arguments never change (a plan's
        step), read by any thread (nothing writes them again)."""
        tail_codes, tail = self.tail
        return KernelParameters("", self.codes + tail_codes, (*pointers, *self.converted(scalars), *tail))
