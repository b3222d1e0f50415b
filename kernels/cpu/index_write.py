"""`out[idx] = values` on the CPU, the values computed by a fused ElementwiseProgram over the value
shape V = (len(idx),) + out.shape[1:] (operands broadcast to V): a generated numba kernel, cached
like the others (the backend's kernel cache and disk cache).

The index entries are taken in order, so where idx repeats a row the last write wins, as NumPy's
assignment does; the parallel variant splits the rows' elements (the dimensions after the first)
across threads, never the index entries. A negative entry counts from the end; entries are checked
against the bounds before the kernel runs (lazytensor.ops.index_write)."""
from __future__ import annotations

import math
import time

import numpy as np

from lazytensor.kernels import launch_log
from lazytensor.kernels.background_compile import wait_for_compiler
from lazytensor.kernels.cpu.backend import PARALLEL_MIN_ELEMENTS, _kernel_arg, _signature
from lazytensor.kernels.cpu.interpret import run_program
from lazytensor.kernels.program import ElementwiseProgram, layout_of
from lazytensor.kernels.cpu.render_numba import JIT, MODULE_HEADER, body_lines, broadcast_element, convert, store_expr


def render_numba_index_write(program: ElementwiseProgram, value_shape: tuple, input_shapes, from_out=()) -> str:
    """from_out: inputs that are the destination's own rows (`y[idx] += e`), read as out[r, ...]."""
    layout = layout_of(value_shape, input_shapes, False)
    return "\n".join(list(MODULE_HEADER) + [_render(program, value_shape, layout, p, from_out) for p in (True, False)])


def _render(program, value_shape, layout, parallel: bool, from_out=()) -> str:
    nd = len(value_shape)
    idx = [f"i{d}" for d in range(nd)]
    params = (["out", "index"] + [f"in{i}" for i in range(program.n_inputs)] +
              [f"s{i}" for i in range(len(program.scalar_dtypes))])
    lines = [f"c{i} = {convert(f's{i}', dt)}" for i, dt in enumerate(program.scalar_dtypes)]
    lines += ["rows = out.shape[0]", "for i0 in range(index.shape[0]):",
              "    r_ = index[i0]", "    if r_ < 0:", "        r_ += rows"]
    depth = 1
    for d in range(1, nd):
        rng = "prange" if parallel and d == 1 else "range"
        lines.append("    " * depth + f"for {idx[d]} in {rng}(out.shape[{d}]):")
        depth += 1
    target = ", ".join(["r_"] + idx[1:])
    element = broadcast_element(layout, idx)
    body = body_lines(program, lambda k: f"out[{target}]" if k in from_out else element(k))
    body.append(f"out[{target}] = {store_expr(f'v{program.result}', program.out_dtype)}")
    lines += ["    " * depth + line for line in body]
    name = "scatter_main" if parallel else "scatter_main_seq"
    return "\n".join([JIT.format(parallel=parallel), f"def {name}({', '.join(params)}):"] +
                     ["    " + line for line in lines] + [""])


def _key(program, value_shape, inputs, from_out) -> tuple:
    return ("index_write", program, len(value_shape), layout_of(value_shape, [a.shape for a in inputs], False).masks,
            from_out)


def index_write_kernel(backend, program, value_shape, inputs, from_out=()):
    return backend.kernels.get_or_build(_key(program, value_shape, inputs, from_out), lambda: backend._build(
        program, render_numba_index_write(program, value_shape, [a.shape for a in inputs], from_out)))


def run_index_write(backend, program, out, index, inputs, scalars, value_shape, from_out=(), compile=False) -> None:
    """compile=True: run the kernel, compiling it first if need be (never the interpreter tier)."""
    small = math.prod(value_shape) < PARALLEL_MIN_ELEMENTS or len(value_shape) == 1
    kernel = backend.kernels.get(_key(program, value_shape, inputs, from_out))
    ready = kernel is not None and (kernel.module.scatter_main_seq if small else kernel.module.scatter_main).overloads
    if not (ready or compile or wait_for_compiler()):
        key = ("index_write", _key(program, value_shape, inputs, from_out), small,
               _signature(out, [index, *inputs], None))
        if not backend.compiler.failed(key):
            _interpret(backend, program, out, index, inputs, scalars, value_shape, from_out, key)
            return
    kernel = index_write_kernel(backend, program, value_shape, inputs, from_out)
    main = kernel.module.scatter_main_seq if small else kernel.module.scatter_main
    fresh = not main.overloads
    started = time.perf_counter()
    main(_kernel_arg(out), index, *[_kernel_arg(a) for a in inputs], *scalars)
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord(
            kernel.name, "cpu", "scatter", int(math.prod(value_shape)), "compiled" if fresh else "memory",
            time.perf_counter() - started if fresh else 0.0, "serial" if small else "parallel"))


def _interpret(backend, program, out, index, inputs, scalars, value_shape, from_out, key) -> None:
    """The interpreter tier: the values by NumPy's ufuncs, written by NumPy's assignment (which
    takes the index in order too); the kernel compiles in the background meanwhile."""
    started = time.perf_counter()
    values = np.empty(value_shape, program.out_dtype)
    # rows of out read by the values: gathered first (from_out is used only without repeated rows)
    run_program(program, values, [out[index] if k in from_out else a for k, a in enumerate(inputs)], scalars)
    out[index] = values
    scratch = out.copy()
    scratch_inputs = [scratch if k in from_out else a for k, a in enumerate(inputs)]
    backend.submit_recorded(key, lambda: run_index_write(backend, program, scratch, index, scratch_inputs, scalars,
                                                         value_shape, from_out, compile=True))
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord(
            "interpreter", "cpu", "scatter", int(math.prod(value_shape)), "none", 0.0,
            f"NumPy ufuncs, {time.perf_counter() - started:.6f} s; the kernel: {backend.compiler.state(key)}"))


def explain_index_write(backend, program, out, index, inputs, value_shape, from_out=()) -> str:
    kernel = index_write_kernel(backend, program, value_shape, inputs, from_out)
    return (f"cpu scatter kernel {kernel.name}: the index entries in order (the last write of a repeated row "
            f"wins), prange over each row's elements\n{kernel.source}")
