"""Running a fused scan on the CPU: the numba kernel of kernels/cpu/render_numba_scan.py, compiled and
cached like the reductions' (the backend's kernel cache, its disk cache), with the interpreter tier
for calls whose kernel has not compiled yet (kernels/scan.py's NumPy version; the kernel compiles in
the background meanwhile)."""
from __future__ import annotations

import math
import time

import numpy as np

from lazytensor.kernels import launch_log
from lazytensor.kernels.background_compile import wait_for_compiler
from lazytensor.kernels.cpu.backend import PARALLEL_MIN_ELEMENTS, _kernel_arg, _signature
from lazytensor.kernels.cpu.render_numba_scan import render_numba_scan
from lazytensor.kernels.scan import Scan, run_scan_with_numpy


def _key(program, spec: Scan, inputs) -> tuple:
    shapes = tuple(a.shape for a in inputs)
    masks = tuple(tuple(d == spec.shape[len(spec.shape) - len(s) + i] for i, d in enumerate(s)) for s in shapes)
    return ("scan", program, spec.kind, spec.axis, len(spec.shape), spec.out_dtype, masks)


def scan_kernel(backend, program, spec: Scan, inputs):
    return backend.kernels.get_or_build(_key(program, spec, inputs), lambda: backend._build(
        program, render_numba_scan(program, spec, [a.shape for a in inputs])))


def run_scan(backend, program, spec: Scan, out, inputs, scalars, compile=False) -> None:
    """out[...] = the scan; compile=True: run the kernel, compiling it first if need be."""
    small = math.prod(spec.shape) < PARALLEL_MIN_ELEMENTS
    kernel = backend.kernels.get(_key(program, spec, inputs))
    ready = kernel is not None and (kernel.module.scan_main_seq if small else kernel.module.scan_main).overloads
    if not (ready or compile or wait_for_compiler()):
        key = ("scan", _key(program, spec, inputs), small, _signature(out, inputs, None))
        if not backend.compiler.failed(key):
            _interpret(backend, program, spec, out, inputs, scalars, key)
            return
    kernel = scan_kernel(backend, program, spec, inputs)
    main = kernel.module.scan_main_seq if small else kernel.module.scan_main
    fresh = not main.overloads
    started = time.perf_counter()
    main(_kernel_arg(out), *[_kernel_arg(a) for a in inputs], *scalars, *spec.shape)
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord(
            kernel.name, "cpu", "scan", int(math.prod(spec.shape)), "compiled" if fresh else "memory",
            time.perf_counter() - started if fresh else 0.0, "serial" if small else "parallel"))


def _interpret(backend, program, spec, out, inputs, scalars, key) -> None:
    started = time.perf_counter()
    try:
        run_scan_with_numpy(program, spec, out, inputs, scalars)
    finally:    # a call the interpreter cannot serve still gets its kernel
        scratch = np.empty(out.shape, out.dtype)
        backend.submit_recorded(key, lambda: run_scan(backend, program, spec, scratch, inputs, scalars, compile=True))
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord(
            "interpreter", "cpu", "scan", int(math.prod(spec.shape)), "none", 0.0,
            f"NumPy ufuncs, {time.perf_counter() - started:.6f} s; the kernel: {backend.compiler.state(key)}"))


def explain_scan(backend, program, spec: Scan, out, inputs) -> str:
    kernel = scan_kernel(backend, program, spec, inputs)
    return (f"cpu scan kernel {kernel.name}: prange over the elements before the axis, the axis in order, "
            f"one running value per element after it\n{kernel.source}")
