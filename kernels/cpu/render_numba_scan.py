"""Render a fused scan (an ElementwiseProgram feeding a Scan, kernels/scan.py) to a numba module.

The rows of the scan are split into the dimensions before the axis (outer) and after it (inner).
prange runs over the outer index; each iteration walks the axis in order and, at each step, the
inner dimensions innermost, keeping one running value per inner element in a small local array.
So memory is read and written in C order whichever the axis, and the running values stay in
cache. The parallel variant (scan_main) serves large arrays, its serial twin (scan_main_seq) small
ones (see render_numba_reduce for why there are two).
"""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.program import ElementwiseProgram, layout_of
from lazytensor.kernels.cpu.render_numba import JIT, MODULE_HEADER, body_lines, broadcast_element, convert, register_type, store_expr
from lazytensor.kernels.scan import Scan


def render_numba_scan(program: ElementwiseProgram, spec: Scan, input_shapes) -> str:
    layout = layout_of(spec.shape, input_shapes, False)
    return "\n".join(list(MODULE_HEADER) + [_render(program, spec, layout, parallel) for parallel in (True, False)])


def _render(program, spec: Scan, layout, parallel: bool) -> str:
    nd = len(spec.shape)
    axis = spec.axis
    idx = [f"i{d}" for d in range(nd)]
    ext = [f"n{d}" for d in range(nd)]
    outer, inner = list(range(axis)), list(range(axis + 1, nd))
    out_dtype = np.dtype(spec.out_dtype)
    acc_type = register_type(out_dtype)
    scalars = [f"s{i}" for i in range(len(program.scalar_dtypes))]
    params = ["out"] + [f"in{i}" for i in range(program.n_inputs)] + scalars + ext
    lines = [f"c{i} = {convert(f's{i}', dt)}" for i, dt in enumerate(program.scalar_dtypes)]
    n_inner = " * ".join(ext[d] for d in inner) or "1"
    lines.append(f"for o_ in {'prange' if parallel else 'range'}({' * '.join(ext[d] for d in outer) or '1'}):")
    row = []
    for d in outer:
        later = " * ".join(ext[e] for e in outer if e > d) or "1"
        row.append(f"{idx[d]} = (o_ // ({later})) % {ext[d]}")
    row.append(f"acc = np.empty({n_inner}, {acc_type})")
    row.append(f"for kk in range({n_inner}):")
    row.append(f"    acc[kk] = {acc_type}({spec.identity})")
    row.append(f"for {idx[axis]} in range({ext[axis]}):")
    step = ["kk = 0"]
    depth = 0
    for d in inner:
        step.append("    " * depth + f"for {idx[d]} in range({ext[d]}):")
        depth += 1
    value = convert(f"v{program.result}", out_dtype)
    running = convert(f"acc[kk] {spec.op} x_", out_dtype)
    at = ", ".join(idx) if idx else "()"
    step += ["    " * depth + line for line in body_lines(program, broadcast_element(layout, idx)) +
             [f"x_ = {value}", f"a_ = {running}", "acc[kk] = a_", f"out[{at}] = {store_expr('a_', out_dtype)}",
              "kk += 1"]]
    row += ["    " + line for line in step]
    lines += ["    " + line for line in row]
    name = "scan_main" if parallel else "scan_main_seq"
    return "\n".join([JIT.format(parallel=parallel), f"def {name}({', '.join(params)}):"] +
                     ["    " + line for line in lines] + [""])
