"""Render a segmented sum (an ElementwiseProgram of one or more outputs over a flat array, each
output's values summed per segment: lazytensor.ops.segments) to a numba module.

One pass over the array computes every output's values and adds them into per-chunk partial sums;
each segment is cut into the chunks a full sum over a 1-D array of its size takes
(render_numba_reduce: one chunk below the parallel size, else CHUNKS), each chunk summed with LANES
partial sums, its tail first, then the lanes in order. So a segment's sum has the bits of the
per-tensor sum over the same values, whatever the thread count (the chunks are the unit of work).

Design: docs/design/kernels.md, section "kernels/cpu/render_numba_reduce.py".
"""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.program import ElementwiseProgram, Segments
from lazytensor.kernels.cpu.render_numba import JIT, body_lines, convert, module_header, store_expr
from lazytensor.kernels.cpu.render_numba_reduce import CHUNKS, LANES


def segment_chunks(segments: Segments, parallel_from: int) -> tuple:
    """(chunk starts, chunk ends, each segment's first chunk, its chunk count) as int64 arrays: a
    segment of fewer than `parallel_from` elements is one chunk, else min(CHUNKS, size) chunks."""
    lo, hi, first, count = [], [], [], []
    for start, n in zip(segments.starts, segments.sizes):
        k = 1 if n < parallel_from else max(1, min(CHUNKS, n))
        first.append(len(lo))
        count.append(k)
        lo += [start + c * n // k for c in range(k)]
        hi += [start + (c + 1) * n // k for c in range(k)]
    return tuple(np.array(v, np.int64) for v in (lo, hi, first, count))


def render_numba_segments(program: ElementwiseProgram, single: tuple, acc_dtype, out_dtype) -> str:
    """The module: segment_main / segment_finish (parallel over chunks, then segments) and serial
    twins (_seq). `single[i]`: input i has one element (read once), else it has the array's length."""
    parallel = _render(program, single, np.dtype(acc_dtype), np.dtype(out_dtype), True)
    serial = _render(program, single, np.dtype(acc_dtype), np.dtype(out_dtype), False)
    return "\n".join(module_header([parallel, serial]) + [parallel, serial])


def _render(program, single, acc_dtype, out_dtype, parallel: bool) -> str:
    loop = "prange" if parallel else "range"
    suffix = "" if parallel else "_seq"
    jit = JIT.format(parallel=parallel)
    n_in = program.n_inputs
    acc = f"np.{acc_dtype.name}"
    outs = [vid for vid, _ in program.stores()]
    scalars = [f"s{i}" for i in range(len(program.scalar_dtypes))]
    params = ", ".join([f"in{i}" for i in range(n_in)] + scalars)
    prologue = [f"c{i} = {convert(f's{i}', dt)}" for i, dt in enumerate(program.scalar_dtypes)]
    prologue += [f"e{i} = in{i}.reshape(-1)[0]" if single[i] else f"x{i} = in{i}.reshape(-1)" for i in range(n_in)]
    body = body_lines(program, lambda i: f"e{i}" if single[i] else f"x{i}[np.uint64(i0)]")
    chunk = ["lo_ = chunk_lo[c]", "hi_ = chunk_hi[c]", f"nb_ = (hi_ - lo_) // {LANES}"]
    chunk += [f"a{k} = {acc}(0)" for k in range(len(outs))]
    chunk += [f"lanes{k} = np.zeros({LANES}, {acc})" for k in range(len(outs))]
    chunk += ["for bb_ in range(nb_):", f"    b0 = lo_ + bb_ * {LANES}", f"    for u in range({LANES}):",
              "        i0 = b0 + u"]
    chunk += ["        " + line for line in body]
    chunk += [f"        lanes{k}[u] += {acc}(v{vid})" for k, vid in enumerate(outs)]
    chunk += [f"for i0 in range(lo_ + nb_ * {LANES}, hi_):"] + ["    " + line for line in body]
    chunk += [f"    a{k} += {acc}(v{vid})" for k, vid in enumerate(outs)]
    chunk += [f"for u in range({LANES}):"] + [f"    a{k} += lanes{k}[u]" for k in range(len(outs))]
    chunk += [f"parts[{k}, c] = a{k}" for k in range(len(outs))]
    src = [jit, f"def segment_main{suffix}(parts, {params}, chunk_lo, chunk_hi):"]
    src += ["    " + line for line in prologue + [f"for c in {loop}(chunk_lo.shape[0]):"]]
    src += ["        " + line for line in chunk]
    src += ["", jit, f"def segment_finish{suffix}(out, parts, first, count):",
            f"    for s in {loop}(first.shape[0]):",
            f"        for k in range({len(outs)}):",
            f"            a = {acc}(0)",
            "            for c in range(first[s], first[s] + count[s]):",
            "                a += parts[k, c]",
            f"            out[k, s] = {store_expr('a', out_dtype)}", ""]
    return "\n".join(src)
