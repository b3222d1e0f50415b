"""Render a fused reduction (an ElementwiseProgram feeding a Reduction) to CUDA C: a main kernel that
evaluates the program per element and folds the values into accumulator states
(kernels/cuda/accumulators.py), and a small kernel that combines per-chunk partial states in order.

Design: docs/design/cuda-kernels.md, section "kernels/cuda/render_cuda_reduce.py".
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from lazytensor.kernels.cuda.accumulators import ACCUMULATORS
from lazytensor.kernels.cuda.layout import BLOCK, RUNTIME
from lazytensor.kernels.cuda.prelude import prelude
from lazytensor.kernels.cuda.reduce_layout import MOMENT_BLOCKS_PER_SM, FinishLayout, ReduceLayout
from lazytensor.kernels.program import ElementwiseProgram, Reduction
# The element code of the elementwise renderer: one SSA body per element, its values in registers.
from lazytensor.kernels.cuda.render_cuda import EXACT, STORAGE, CudaSource, body_lines, register_value, \
    convert, scalar_parameters, uses_bfloat16, uses_complex, uses_float16
from lazytensor.kernels.ops import BFLOAT16

_F16 = np.dtype(np.float16)
_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)
_NAME = "LT_KERNEL_NAME"
MOMENT_RUN = 32        # rows per run of the columns moments (lt_moments::fold)


def accumulator_type(spec: Reduction) -> str:
    """The C type of one accumulator state of `spec`."""
    kind = spec.kind
    t = EXACT[spec.acc_dtype]
    if kind in ("sum", "mean"):
        return f"lt_sum<{t}>"
    if kind == "prod":
        return f"lt_prod<{t}>"
    if kind in ("max", "min"):
        return f"lt_extreme<{t}, {'true' if kind == 'max' else 'false'}>"
    if kind in ("any", "all"):
        return f"lt_logical<{'true' if kind == 'any' else 'false'}>"
    if kind in ("argmax", "argmin"):
        return f"lt_arg<{t}, {'true' if kind == 'argmax' else 'false'}>"
    if kind in ("var", "meanvar"):
        return "lt_moments"
    raise ValueError(f"unknown reduction kind {kind!r}")


def state_dtype(spec: Reduction) -> np.dtype:
    """A NumPy dtype with the size and alignment of one accumulator state (C layout rules): the host
    allocates the partial-state scratch array with it."""
    kind = spec.kind
    if kind in ("var", "meanvar"):
        fields = [_F64, _F64, _F64]
    elif kind in ("argmax", "argmin"):
        fields = [spec.acc_dtype, _I64]
    elif kind in ("any", "all"):
        fields = [np.dtype(bool)]
    else:
        fields = [spec.acc_dtype]
    return np.dtype({"names": [f"f{i}" for i in range(len(fields))], "formats": fields}, align=True)


def _value_type(spec: Reduction) -> tuple:
    """(C type, dtype) of the values pushed into the accumulator."""
    if spec.kind in ("var", "meanvar"):
        return "double", _F64
    if spec.kind in ("any", "all"):
        return "bool", np.dtype(bool)
    return EXACT[spec.acc_dtype], spec.acc_dtype


def _stored(expr: str, src: np.dtype, out: np.dtype) -> str:
    value = expr if src == out else convert(expr, out, src)
    if out == BFLOAT16:
        return f"lt_f2bf({value})"
    return f"__float2half_rn({value})" if out == _F16 else value


def store_lines(spec: Reduction, s: str, k: str) -> list:
    """Statements storing the finalized result of state `s` for output `k` (out is flat, contiguous)."""
    out, kind = spec.out_dtype, spec.kind
    if kind == "mean" and spec.acc_dtype.kind == "c":       # NumPy's quotient of complex by count
        return [f"out[{k}] = {_stored(f'lt_cdiv({s}.a, lt_c128(count))', spec.acc_dtype, out)};"]
    if kind == "mean":
        return [f"out[{k}] = {_stored(f'((double)({s}.a) / count)', _F64, out)};"]
    if kind == "var":
        value = f"({s}.q / denom)"
        return [f"out[{k}] = {_stored(f'sqrt{value}' if spec.root else value, _F64, out)};"]
    if kind == "meanvar":
        return [f"out[{k}] = {_stored(f'{s}.m', _F64, out)};",
                f"out[K + {k}] = {_stored(f'({s}.q / denom)', _F64, out)};"]
    if kind in ("argmax", "argmin"):
        return [f"out[{k}] = {_stored(f'{s}.i', _I64, out)};"]
    if kind in ("any", "all"):
        return [f"out[{k}] = {_stored(f'{s}.a', np.dtype(bool), out)};"]
    return [f"out[{k}] = {_stored(f'{s}.a', spec.acc_dtype, out)};"]


def _indent(lines: list, depth: int = 1) -> list:
    return ["    " * depth + line if line else line for line in lines]


def _unravel(var: str, extents: list, prefix: str) -> tuple:
    """-> (statements, index names): `var` split over `extents` (C order)."""
    if len(extents) == 1:
        return [], [var]
    lines = [f"lt_uindex {prefix}rest = (lt_uindex)({var});"]
    names = [None] * len(extents)
    for d in range(len(extents) - 1, 0, -1):
        lines.append(f"const lt_index {prefix}{d} = (lt_index)({prefix}rest % (lt_uindex){extents[d]});")
        lines.append(f"{prefix}rest /= (lt_uindex){extents[d]};")
        names[d] = f"{prefix}{d}"
    lines.append(f"const lt_index {prefix}0 = (lt_index){prefix}rest;")
    names[0] = f"{prefix}0"
    return lines, names


def _offset(k: int, classes: tuple, first_dim: int, names: list) -> str:
    terms = []
    for j, (cls, idx) in enumerate(zip(classes, names)):
        if cls == 1:
            terms.append(idx)
        elif cls == RUNTIME:
            terms.append(f"{idx} * in{k}_s{first_dim + j}")
    return " + ".join(terms) if terms else "0"


@dataclass(frozen=True)
class _Kernel:
    """What the skeletons need to know about the program and the accumulator."""
    program: ElementwiseProgram
    spec: Reduction
    layout: ReduceLayout
    acc: str
    value_c: str
    value_dtype: np.dtype
    dtypes: tuple          # input dtypes

    def offsets(self, which: str, var: str, tag: str) -> list:
        """Statements defining in<k>_<tag>: each operand's offset along the kept ("k") or reduced
        ("r") dimensions for flat index `var`."""
        lay = self.layout
        if which == "k":
            extents = [f"ek{d}" for d in range(lay.kept_ndim)]
            first, count = 0, lay.kept_ndim
        else:
            extents = [f"er{d}" for d in range(lay.reduced_ndim)]
            first, count = lay.kept_ndim, lay.reduced_ndim
        if count == 0:
            return [f"const lt_index in{k}_{tag} = 0;" for k in range(self.program.n_inputs)]
        used = any(cls != 0 for acc in lay.access for cls in acc[first:first + count])
        lines, names = _unravel(var, extents, f"{tag}_i") if used else ([], [])
        for k in range(self.program.n_inputs):
            classes = lay.access[k][first:first + count]
            lines.append(f"const lt_index in{k}_{tag} = {_offset(k, classes, first, names) if used else '0'};")
        return lines

    def loads(self, u: int, vector_dim: int, koff: str, roff: str) -> list:
        """Vector loads of step `u` for every operand: in<k>_v<u>[vector] or the broadcast in<k>_b<u>."""
        lines = []
        for k, dtype in enumerate(self.dtypes):
            st = STORAGE[dtype]
            at = f"in{k} + {koff.format(k=k)} + {roff.format(k=k)}"
            if self.layout.access[k][vector_dim] == 1:
                lines.append(f"__align__(16) {st} in{k}_v{u}[{self.layout.vector}];")
                lines.append(f"lt_copy_vector<{self.layout.vector * dtype.itemsize}>(in{k}_v{u}, {at});")
            else:
                lines.append(f"const {st} in{k}_b{u} = *({at});")
        return lines

    def element(self, element_of, push: str) -> list:
        """A block computing one element with the program and pushing it: `push` formats `{x}`."""
        value = f"v{self.program.result}"
        result_dtype = np.dtype(self.program.instrs[self.program.result][1])
        x = convert(value, self.value_dtype, result_dtype) if result_dtype != self.value_dtype else value
        lines = body_lines(self.program, element_of)
        lines.append(f"const {self.value_c} x_ = {x};")
        lines.append(push.format(x="x_"))
        return ["{"] + _indent(lines) + ["}"]

    def vector_step(self, u: int, vector_dim: int, index: str, lane_states: bool) -> list:
        """Push the `vector` lanes of load step u: lane l into st[l]. `index` formats `{l}` into the
        reduced index of lane l (argmax/argmin)."""
        moments = self.spec.kind in ("var", "meanvar")
        lines = []
        if moments:     # every lane holds the same count: one division for all of them
            lines.append(f"const double rcp{u} = 1.0 / (st[0].n + 1.0);")
            return lines + self.lanes(u, vector_dim, "st[{l}].push_counted({x}, rcp%d);" % u)
        return self.lanes(u, vector_dim, f"st[{{l}}].push({{x}}, {index});")

    def lanes(self, u: int, vector_dim: int, push: str) -> list:
        """The `vector` lanes of load step u, each computed and handed to `push`, which formats `{x}`
        (the value) and `{l}` (the lane)."""
        lines = []
        for lane in range(self.layout.vector):
            def element_of(k, lane=lane):
                ref = f"in{k}_v{u}[{lane}]" if self.layout.access[k][vector_dim] == 1 else f"in{k}_b{u}"
                return register_value(ref, self.dtypes[k])
            lines += self.element(element_of, push.replace("{l}", str(lane)))
        return lines

    def scalar_element(self, koff: str, roff: str, push: str) -> list:
        def element_of(k):
            return register_value(f"in{k}[{koff.format(k=k)} + {roff.format(k=k)}]", self.dtypes[k])
        return self.element(element_of, push)


def _signature(kernel: _Kernel) -> list:
    program, lay, spec = kernel.program, kernel.layout, kernel.spec
    index_t = "long long" if lay.index64 else "int"
    params = [f"const {STORAGE[d]}* __restrict__ in{k}" for k, d in enumerate(kernel.dtypes)]
    params += scalar_parameters(program)
    params += [f"{kernel.acc}* __restrict__ partial", f"{STORAGE[spec.out_dtype]}* __restrict__ out",
               f"const {index_t} K", f"const {index_t} R", f"const {index_t} C"]
    params += [f"const {index_t} ek{d}" for d in range(lay.kept_ndim)]
    params += [f"const {index_t} er{d}" for d in range(lay.reduced_ndim)]
    params += [f"const {index_t} in{k}_s{d}" for k, d in lay.stride_args()]
    params += ["const double count", "const double denom"]
    return params


def _rows_body(kernel: _Kernel) -> list:
    lay = kernel.layout
    v, u_n, g = lay.vector, lay.unroll, lay.group
    vector_dim = lay.kept_ndim + lay.reduced_ndim - 1
    lines = []
    if g == BLOCK:
        lines += ["const lt_index k = (lt_index)blockIdx.x / C;", "const lt_index c = (lt_index)blockIdx.x % C;",
                  "const int lane = threadIdx.x;"]
    else:
        lines += [f"const lt_index k = (lt_index)blockIdx.x * {BLOCK // g} + threadIdx.x / {g};",
                  "const lt_index c = 0;", f"const int lane = threadIdx.x % {g};"]
    lines += ["const bool active = k < K;", f"{kernel.acc} st[{v}];", "#pragma unroll",
              f"for (int l = 0; l < {v}; ++l) st[l].init();"]
    if lay.tail:
        lines += [f"{kernel.acc} tail_state;", "tail_state.init();"]
    loop = kernel.offsets("k", "k", "k")
    # Chunk c takes the group-wide steps c, c + C, c + 2C, ...: all blocks sweep memory together.
    loop += [f"const lt_index steps = R / {v};", f"const lt_index stride = C * {g};",
             f"lt_index j = c * {g} + lane;"]

    def step(u_count: int, stride: str) -> list:
        body = []
        for u in range(u_count):
            body.append(f"const lt_index r{u} = (j + {u} * stride) * {v};")
            body += kernel.offsets("r", f"r{u}", f"r{u}")
        for u in range(u_count):
            if v > 1:
                body += kernel.loads(u, vector_dim, "in{k}_k", f"in{{k}}_r{u}")
        for u in range(u_count):
            if v > 1:
                body += kernel.vector_step(u, vector_dim, f"r{u} + {{l}}", True)
            else:
                body += kernel.scalar_element("in{k}_k", f"in{{k}}_r{u}", f"st[0].push({{x}}, r{u});")
        return [f"for (; {stride}) {{"] + _indent(body) + ["}"]

    if u_n > 1:
        loop += step(u_n, f"j + {u_n - 1} * stride < steps; j += {u_n} * stride")
    loop += step(1, "j < steps; j += stride")
    if lay.tail:
        tail = [f"for (lt_index r = steps * {v} + lane; r < R; r += {g}) {{"]
        inner = kernel.offsets("r", "r", "rt")
        inner += kernel.scalar_element("in{k}_k", "in{k}_rt", "tail_state.push({x}, r);")
        tail += _indent(inner) + ["}"]
        loop += ["if (c == C - 1) {"] + _indent(tail) + ["}"]
    lines += ["if (active) {"] + _indent(loop) + ["}"]
    for lane in range(1, v):
        lines.append(f"st[0].merge(st[{lane}]);")
    if lay.tail:
        lines.append("st[0].merge(tail_state);")
    lines.append(f"{kernel.acc} s = st[0];")
    if g == BLOCK:
        lines.append(f"s = lt_block_reduce<{kernel.acc}, {BLOCK}>(s);")
    elif g > 1:
        lines.append(f"s = lt_warp_reduce(s, {g});")
    store = store_lines(kernel.spec, "s", "k")
    lines += ["if (active && lane == 0) {",
              *_indent(["if (C == 1) {", *_indent(store), "} else {", "    partial[c * K + k] = s;", "}"]), "}"]
    return lines


def _columns_body(kernel: _Kernel) -> list:
    lay = kernel.layout
    v, u_n, g, slots = lay.vector, lay.unroll, lay.group, lay.row_slots
    vector_dim = lay.kept_ndim - 1
    lines = [f"const int tx = threadIdx.x % {g};", f"const int ty = threadIdx.x / {g};",
             f"const lt_index k = ((lt_index)blockIdx.x * {g} + tx) * {v};",
             "const lt_index c = (lt_index)blockIdx.y;",
             "const bool active = k < K;", f"{kernel.acc} st[{v}];", "#pragma unroll",
             f"for (int l = 0; l < {v}; ++l) st[l].init();"]
    loop = kernel.offsets("k", "k", "k")
    # Chunk c takes the row blocks c, c + C, c + 2C, ... (`row_slots` rows each).
    loop += [f"const lt_index stride = C * {slots};", f"lt_index j = c * {slots} + ty;"]

    def steps(u_count: int, push: str) -> list:
        """`u_count` load steps from row j on; `push` formats `{x}`, `{l}` (lane) and `{r}` (row)."""
        body = []
        for u in range(u_count):
            body.append(f"const lt_index r{u} = j + {u} * stride;")
            body += kernel.offsets("r", f"r{u}", f"r{u}")
        for u in range(u_count):
            if v > 1:
                body += kernel.loads(u, vector_dim, "in{k}_k", f"in{{k}}_r{u}")
        for u in range(u_count):
            at = push.replace("{r}", f"r{u}")
            if v > 1:
                body += kernel.lanes(u, vector_dim, at)
            else:
                body += kernel.scalar_element("in{k}_k", f"in{{k}}_r{u}", at.replace("{l}", "0"))
        return body

    if kernel.spec.kind in ("var", "meanvar"):
        loop += _moment_runs(steps, v, u_n)
    else:
        push = "st[{l}].push({x}, {r});"
        if u_n > 1:
            loop += [f"for (; j + {u_n - 1} * stride < R; j += {u_n} * stride) {{",
                     *_indent(steps(u_n, push)), "}"]
        loop += ["for (; j < R; j += stride) {", *_indent(steps(1, push)), "}"]
    lines += ["if (active) {"] + _indent(loop) + ["}"]
    lines += _combine_row_slots(kernel)
    store = []
    for lane in range(v):
        s = f"st[{lane}]"
        at = f"k + {lane}" if lane else "k"
        store += ["if (C == 1) {", *_indent(store_lines(kernel.spec, s, at)), "} else {",
                  f"    partial[c * K + {at}] = {s};", "}"]
    lines += ["if (active && ty == 0) {", *_indent(store), "}"]
    return lines


def _moment_runs(steps, v: int, u_n: int) -> list:
    """The columns loop of var/meanvar: each lane's state starts from the thread's first row, then
    takes runs of at most MOMENT_RUN rows as sums of deviations from its mean (lt_moments::fold,
    which says why and how accurate)."""
    lanes = range(v)
    lines = ["if (j < R) {", *_indent(steps(1, "st[{l}].start({x});")), "    j += stride;", "}",
             "while (j < R) {"]
    run = [f"int run = (int)min((lt_index)((R - 1 - j) / stride + 1), (lt_index){MOMENT_RUN});",
           "const double total = st[0].n + (double)run;",
           "const double reciprocal = 1.0 / total;",
           *[f"double s1_{l} = 0.0, s2_{l} = 0.0;" for l in lanes]]
    push = "lt_deviation_push({x}, st[{l}].m, s1_{l}, s2_{l});"
    if u_n > 1:
        run += [f"for (; run >= {u_n}; run -= {u_n}, j += {u_n} * stride) {{", *_indent(steps(u_n, push)), "}"]
    run += ["for (; run > 0; --run, j += stride) {", *_indent(steps(1, push)), "}"]
    run += [f"st[{l}].fold(s1_{l}, s2_{l}, total, reciprocal);" for l in lanes]
    return lines + _indent(run) + ["}"]


def _combine_row_slots(kernel: _Kernel) -> list:
    """Combine the states of a block's row slots into row slot 0, every lane at once in a fixed tree:
    warp shuffles between the row slots that share a warp, then shared memory between warps (one
    barrier per level, not one per level and lane: with eight lanes of double moments the lane-by-
    lane tree held each block ~40 barriers and dependent divisions at its end)."""
    lay = kernel.layout
    v, g, slots = lay.vector, lay.group, lay.row_slots
    if slots == 1:
        return []
    lines = []
    if g < 32:          # 32 / g row slots per warp: shuffles leave their state in the first row's threads
        off = 16
        while off >= g:
            lines += [f"st[{l}].merge(st[{l}].shfl_down({off}, 32));" for l in range(v)]
            off //= 2
        groups, member, holder = BLOCK // 32, "(int)(threadIdx.x / 32)", f"(threadIdx.x % 32) < {g}"
    else:
        groups, member, holder = slots, "ty", "true"
    if groups == 1:
        return lines
    lines += [f"__shared__ {kernel.acc} slot_states[{groups // 2 * g * v}];",
              f"const int member = {member};", f"const bool holder = {holder};"]
    half = groups // 2
    while half >= 1:
        lines += [f"if (holder && member >= {half} && member < {2 * half}) {{",
                  *[f"    slot_states[((member - {half}) * {v} + {l}) * {g} + tx] = st[{l}];" for l in range(v)],
                  "}", "__syncthreads();", f"if (holder && member < {half}) {{",
                  *[f"    st[{l}].merge(slot_states[(member * {v} + {l}) * {g} + tx]);" for l in range(v)],
                  "}"]
        if half > 1:
            lines.append("__syncthreads();")
        half //= 2
    return lines


def _finish(name_part: str, source_kernel: str, float16: bool, bfloat16: bool = False,
            complex_: bool = False) -> CudaSource:
    head = prelude(float16, bfloat16, complex_) + ACCUMULATORS
    name = f"lt_{name_part}_" + hashlib.sha1((head + source_kernel).encode()).hexdigest()[:20]
    kernel = source_kernel.replace(_NAME, name)
    return CudaSource(name, head + "\n" + kernel, float16, kernel, bfloat16)


def render_cuda_reduce(program: ElementwiseProgram, spec: Reduction, layout: ReduceLayout) -> CudaSource:
    """The main kernel of `spec` over the values of `program`, walking the input as `layout` says."""
    value_c, value_dtype = _value_type(spec)
    kernel = _Kernel(program, spec, layout, accumulator_type(spec), value_c, value_dtype,
                     tuple(np.dtype(d) for d in program.input_dtypes()))
    index_t, uindex_t = ("long long", "unsigned long long") if layout.index64 else ("int", "unsigned int")
    body = [f"typedef {index_t} lt_index;", f"typedef {uindex_t} lt_uindex;"]
    body += _rows_body(kernel) if layout.shape == "rows" else _columns_body(kernel)
    signature = ",\n        ".join(_signature(kernel))
    bounds = f"{BLOCK}, {MOMENT_BLOCKS_PER_SM}" if spec.kind in ("var", "meanvar") else f"{BLOCK}"
    text = "\n".join([f'extern "C" __global__ void __launch_bounds__({bounds}) {_NAME}(\n        {signature})',
                      "{", *_indent(body), "}", ""])
    return _finish("reduce", text, uses_float16(program) or spec.out_dtype == _F16,
                   uses_bfloat16(program) or spec.out_dtype == BFLOAT16, uses_complex(program))


def render_cuda_finish(spec: Reduction, layout: FinishLayout) -> CudaSource:
    """The kernel combining the chunks' partial states of each output, chunk 0 first, and storing the
    finalized results. It depends on the accumulator and the output only, not on the program."""
    acc = accumulator_type(spec)
    g = layout.group
    index_t = "long long" if layout.index64 else "int"
    body = [f"typedef {index_t} lt_index;",
            f"const lt_index t = (lt_index)blockIdx.x * {BLOCK} + threadIdx.x;",
            f"const lt_index k = t / {g};", f"const int lane = (int)(t % {g});",
            f"{acc} s;", "s.init();",
            "if (k < K) {",
            f"    const lt_index lo = (lt_index)lane * C / {g}, hi = ((lt_index)lane + 1) * C / {g};",
            "    for (lt_index c = lo; c < hi; ++c) s.merge(partial[c * K + k]);",
            "}"]
    if g == BLOCK:
        body.append(f"s = lt_block_reduce<{acc}, {BLOCK}>(s);")
    elif g > 1:
        body.append(f"s = lt_warp_reduce(s, {g});")
    body += ["if (k < K && lane == 0) {", *_indent(store_lines(spec, "s", "k")), "}"]
    params = [f"const {acc}* __restrict__ partial", f"{STORAGE[spec.out_dtype]}* __restrict__ out",
              f"const {index_t} K", f"const {index_t} C", "const double count", "const double denom"]
    signature = ",\n        ".join(params)
    text = "\n".join([f'extern "C" __global__ void __launch_bounds__({BLOCK}) {_NAME}(\n        {signature})',
                      "{", *_indent(body), "}", ""])
    return _finish("finish", text, spec.out_dtype == _F16, spec.out_dtype == BFLOAT16, spec.acc_dtype.kind == "c")
