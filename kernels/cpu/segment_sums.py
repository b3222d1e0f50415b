"""The CPU backend's segmented sums (lazytensor.ops.segments): the numba kernel of
render_numba_segments once it is compiled, the interpreter tier meanwhile (and always under
LAZYTENSOR_TIER=interpreter); both sum in one order, so the tier does not change the bits."""
from __future__ import annotations

import time

import numpy as np

from lazytensor.kernels import launch_log
from lazytensor.kernels.background_compile import wait_for_compiler
from lazytensor.kernels.cpu.interpret_segments import run_segment_sums as interpret_segment_sums
from lazytensor.kernels.cpu.render_numba_segments import render_numba_segments, segment_chunks

_chunks: dict = {}      # (segments, parallel_from) -> segment_chunks'


def run_segment_sums(backend, program, segments, out, inputs, scalars, acc_dtype, parallel_from, compile=False):
    """out (outputs x segments) = each output's per-segment sums. Inputs: C-contiguous, each of
    segments.length elements or of one (read once)."""
    from lazytensor.kernels.cpu.backend import _kernel_arg
    key = (segments, parallel_from)
    chunks = _chunks.get(key)
    if chunks is None:
        if len(_chunks) > 1024:
            _chunks.clear()
        chunks = _chunks[key] = segment_chunks(segments, parallel_from)
    single = tuple(a.size == 1 and segments.length != 1 for a in inputs)
    kernel_key = ("segments", program, single, np.dtype(acc_dtype), out.dtype)
    large = segments.length >= parallel_from
    kernel = backend.kernels.get(kernel_key)
    ready = kernel is not None and (kernel.module.segment_main if large else kernel.module.segment_main_seq).overloads
    if not (ready or compile or wait_for_compiler()):
        started = time.perf_counter()
        try:
            interpret_segment_sums(program, segments, out, inputs, scalars, chunks, acc_dtype)
        finally:    # its kernel compiles meanwhile, by running once on the same operands into scratch memory
            scratch = np.empty(out.shape, out.dtype)
            backend.submit_recorded(kernel_key + (large,), lambda: run_segment_sums(
                backend, program, segments, scratch, inputs, scalars, acc_dtype, parallel_from, compile=True))
        if launch_log.listeners:
            launch_log.record(launch_log.KernelRecord(
                "interpreter", "cpu", "reduction", segments.length, "none", 0.0,
                f"segmented sum, NumPy ufuncs, {time.perf_counter() - started:.6f} s"))
        return
    kernel = backend.kernels.get_or_build(kernel_key, lambda: backend._build(
        program, render_numba_segments(program, single, acc_dtype, out.dtype)))
    module = kernel.module
    main, finish = ((module.segment_main, module.segment_finish) if large else
                    (module.segment_main_seq, module.segment_finish_seq))
    fresh = not main.overloads
    started = time.perf_counter()
    lo, hi, first, count = chunks
    parts = np.empty((out.shape[0], lo.shape[0]), acc_dtype)
    main(parts, *[_kernel_arg(a) for a in inputs], *scalars, lo, hi)
    finish(_kernel_arg(out), parts, first, count)
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord(
            kernel.name, "cpu", "reduction", segments.length, "compiled" if fresh else "memory",
            time.perf_counter() - started if fresh else 0.0, f"segmented sum, {len(segments.sizes)} segments"))


def explain_segment_sums(backend, program, segments, out, inputs, acc_dtype) -> str:
    single = tuple(a.size == 1 and segments.length != 1 for a in inputs)
    return "cpu segmented-sum kernel\n" + render_numba_segments(program, single, acc_dtype, out.dtype)
