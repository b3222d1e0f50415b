"""Render an ElementwiseProgram and a CudaLayout (kernels/cuda/layout.py) to the CUDA C source of one
`extern "C" __global__` kernel, with the semantics of render_numba: every op result is converted to
its dtype, float16 and bfloat16 values live in float registers and are rounded after each op, and
a value the program shares is computed once per element.

The kernel is a grid-stride loop. With a vector layout each step moves `vector` elements of every
operand with 16-byte loads and stores (a broadcast operand, stride 0 in the innermost dimension,
is read once per step); a one-dimensional vector kernel ends with a scalar tail. Indices are
unravelled only as far as some operand needs: a per-channel vector of an (N, C) tensor costs one
modulo. A layout with the row loop (cuda_layout.py, 4.) reads its per-channel operands once per
thread instead, before a loop over rows that keeps the thread's channels fixed.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from lazytensor.kernels.cuda.layout import BLOCK, CONTIGUOUS, CudaLayout, operand_names
from lazytensor.kernels.cuda.prelude import prelude
from lazytensor.kernels.ops import BFLOAT16, OPS, kind, real_dtype
from lazytensor.kernels.program import ElementwiseProgram, output_name

_F16 = np.dtype(np.float16)
_BOOL = np.dtype(bool)
_NAME = "LT_KERNEL_NAME"

# Options for NVRTC. IEEE semantics as NumPy has them: no contraction of a*b+c into an FMA (NumPy
# rounds the product), float32 subnormals kept, exact division and square root.
NVRTC_OPTIONS = ("--std=c++17", "--fmad=false", "-ftz=false", "-prec-div=true", "-prec-sqrt=true")

# The C type of each dtype's elements in memory.
STORAGE = {np.dtype(k): v for k, v in {
    "bool": "bool", "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
    "uint64": "unsigned long long", "float16": "__half", "float32": "float", "float64": "double"}.items()}
STORAGE[BFLOAT16] = "__nv_bfloat16"
STORAGE[np.dtype(np.complex64)] = "lt_c64"        # (kernels/cuda/complex_prelude.py)
STORAGE[np.dtype(np.complex128)] = "lt_c128"
_HALVES = (_F16, BFLOAT16)
_F32_EXACT = (_F16, np.dtype(np.float32))

# The C type a value is converted to: the dtype's own, float16's and bfloat16's being float once rounded.
EXACT = {**STORAGE, _F16: "float", BFLOAT16: "float"}

# The C type a value is held in. 8- and 16-bit integers widen to 32 bits, so C's promotions never
# turn the product of two unsigned shorts into an overflowing signed int; each op's result is
# still converted to its dtype, so the register holds a value of that dtype.
REGISTER = {**EXACT, **{np.dtype(k): v for k, v in {
    "int8": "int", "int16": "int", "uint8": "unsigned int", "uint16": "unsigned int"}.items()}}

UNSIGNED = {"int": "unsigned int", "long long": "unsigned long long"}


@dataclass(frozen=True)
class CudaSource:
    name: str
    source: str        # the whole translation unit: prelude + kernel
    float16: bool      # needs cuda_fp16.h on the include path
    kernel: str        # the kernel function alone (tests compile many behind one prelude)
    bfloat16: bool = False      # needs cuda_bf16.h (on the same include path)


def uses_float16(program: ElementwiseProgram) -> bool:
    return (any(dtype == _F16 for _, dtype in program.stores())
            or any(np.dtype(ins[1]) == _F16 for ins in program.instrs))


def uses_bfloat16(program: ElementwiseProgram) -> bool:
    return (any(dtype == BFLOAT16 for _, dtype in program.stores())
            or any(np.dtype(ins[1]) == BFLOAT16 for ins in program.instrs))


def convert(expr: str, dst: np.dtype, src: np.dtype | None = None) -> str:
    """Convert a value to dtype `dst` as NumPy's casting does (float16: round, held as float). bfloat16
    as ml_dtypes casts (kernels/cpu/render_numba.convert says how)."""
    if dst.kind == "c":
        return f"lt_to_complex<{STORAGE[dst]}>({expr})"
    if src is not None and src.kind == "c":
        if dst == _BOOL:
            return f"(({expr}).re != 0 || ({expr}).im != 0)"
        expr, src = f"({expr}).re", real_dtype(src)     # NumPy's cast drops the imaginary part
    if dst == _F16:
        return f"lt_round_f16({expr})"
    if dst == BFLOAT16:
        return f"lt_round_bf16({expr})" if src is None or src in _F32_EXACT else f"lt_round_bf16_d({expr})"
    if dst == _BOOL:
        return f"((bool)({expr}))"
    if src == BFLOAT16 and dst.kind in "iu":
        info = np.iinfo(dst)
        return f"lt_bf16_to_int<{EXACT[dst]}>({expr}, {float(info.min)!r}, {float(info.max) + 1.0!r})"
    if dst.kind in "iu" and src is not None and src.kind == "f":
        return f"lt_float_to_int<{EXACT[dst]}>({expr})"
    return f"(({EXACT[dst]})({expr}))"


def uses_complex(program: ElementwiseProgram) -> bool:
    return (any(np.dtype(dtype).kind == "c" for _, dtype in program.stores())
            or any(np.dtype(ins[1]).kind == "c" for ins in program.instrs))


def scalar_parameters(program: ElementwiseProgram) -> list:
    """The kernel parameters of the program's scalars, s0, s1, ...: a complex scalar arrives as its two
    parts (kernels/cuda/kernel.scalar_arguments), s<k>_re and s<k>_im, which make s<k> in the
    declaration of the last (a parameter may not be declared from another, so through a comma
    expression: the struct is built where it is used, by scalar_value)."""
    params = []
    for k, d in enumerate(program.scalar_dtypes):
        d = np.dtype(d)
        if d.kind == "c":
            part = EXACT[real_dtype(d)]
            params += [f"const {part} s{k}_re", f"const {part} s{k}_im"]
        else:
            params.append(f"const {EXACT[d]} s{k}")
    return params


def scalar_value(program: ElementwiseProgram, k: int) -> str:
    d = np.dtype(program.scalar_dtypes[k])
    return f"{STORAGE[d]}(s{k}_re, s{k}_im)" if d.kind == "c" else f"s{k}"


def register_value(expr: str, dtype: np.dtype) -> str:
    if dtype == BFLOAT16:
        return f"__bfloat162float({expr})"
    return f"__half2float({expr})" if dtype == _F16 else expr


def body_lines(program: ElementwiseProgram, element_of) -> list[str]:
    """Straight-line statements for one element; `element_of(k)` is input k's value in a register."""
    dtypes = [np.dtype(ins[1]) for ins in program.instrs]
    lines = []
    for vid, (op, dtype, *args) in enumerate(program.instrs):
        dtype = dtypes[vid]
        if op == "load":
            rhs = element_of(args[0])
        elif op == "scalar":
            rhs = scalar_value(program, args[0])
        elif op == "astype":
            rhs = convert(f"v{args[0]}", dtype, dtypes[args[0]])
        else:
            kinds = "".join(kind(dtypes[a]) for a in args)
            if len(set(kinds)) == 1:
                kinds = kinds[0]
            loop_t = REGISTER[dtypes[args[0]]]
            bits = dtypes[args[0]].itemsize * 8
            snippet = OPS[op].snippet("c", kinds, bits, dtypes[args[-1]] == BFLOAT16)
            rhs = convert(snippet.format(*(f"v{a}" for a in args), T=loop_t, U=UNSIGNED.get(loop_t, loop_t),
                                         N=bits), dtype)
        lines.append(f"const {REGISTER[dtype]} v{vid} = {rhs};")
    return lines


def _stored(program: ElementwiseProgram, vid: int | None = None, out: np.dtype | None = None) -> str:
    """Value `vid` (the result) converted to its destination's dtype (out_dtype) and storage type."""
    if vid is None:
        vid, out = program.result, program.out_dtype
    result_dtype = np.dtype(program.instrs[vid][1])
    value = f"v{vid}"
    if result_dtype != out:
        value = convert(value, out, result_dtype)
    if out == BFLOAT16:
        return f"lt_f2bf({value})"
    return f"__float2half_rn({value})" if out == _F16 else value


def _extra_outputs(program: ElementwiseProgram) -> list:
    """(name, value id, dtype) of out1, out2, ...: the further outputs of a program with several."""
    return [(output_name(k), vid, dtype) for k, (vid, dtype) in enumerate(program.outputs) if k]


def _indexing(layout: CudaLayout, names: list, i: str) -> list[str]:
    """Statements that set `<name>_o`, each operand's element offset for flat index `i`."""
    lines = []
    needed = layout.needed_dims()
    index = {}
    if needed:
        lo, nd = needed[0], layout.ndim
        if nd == 1:
            index[0] = i
        else:
            lines.append(f"lt_uindex rest = (lt_uindex)({i});")
            for d in range(nd - 1, lo, -1):
                if d in needed:
                    lines.append(f"const lt_index i{d} = (lt_index)(rest % (lt_uindex)e{d});")
                    index[d] = f"i{d}"
                lines.append(f"rest /= (lt_uindex)e{d};")
            lines.append(f"const lt_index i{lo} = (lt_index)rest;" if lo == 0 else
                         f"const lt_index i{lo} = (lt_index)(rest % (lt_uindex)e{lo});")
            index[lo] = f"i{lo}"
    for name, acc in zip(names, layout.access):
        if acc == CONTIGUOUS:
            offset = i
        else:
            terms = [index[d] if cls == 1 else f"{index[d]} * {name}_s{d}"
                     for d, cls in enumerate(acc) if cls != 0]
            offset = " + ".join(terms) if terms else "0"
        lines.append(f"const lt_index {name}_o = {offset};")
    return lines


def _scalar_step(program: ElementwiseProgram, layout: CudaLayout, names: list, dtypes: list, i: str) -> list[str]:
    lines = _indexing(layout, names, i)
    lines += body_lines(program, lambda k: register_value(f"in{k}[in{k}_o]", dtypes[k + 1]))
    lines.append(f"out[out_o] = {_stored(program)};")
    lines += [f"{name}[{name}_o] = {_stored(program, vid, dtype)};" for name, vid, dtype in _extra_outputs(program)]
    return lines


def _vector_step(program: ElementwiseProgram, layout: CudaLayout, names: list, dtypes: list) -> list[str]:
    v = layout.vector
    lines = _indexing(layout, names, "i")
    inputs = program.n_inputs
    for k, (name, acc) in enumerate(zip(names[1:1 + inputs], layout.access[1:1 + inputs])):
        st = STORAGE[dtypes[k + 1]]
        if acc == CONTIGUOUS or acc[-1] == 1:
            lines.append(f"__align__(16) {st} {name}_v[{v}];")
            lines.append(f"lt_copy_vector<{v * dtypes[k + 1].itemsize}>({name}_v, {name} + {name}_o);")
        else:                   # stride 0 innermost: one value for the whole step
            lines.append(f"const {st} {name}_b = {name}[{name}_o];")

    def element_of(k):
        acc = layout.access[k + 1]
        ref = f"in{k}_v[lane]" if acc == CONTIGUOUS or acc[-1] == 1 else f"in{k}_b"
        return register_value(ref, dtypes[k + 1])

    extra = _extra_outputs(program)
    lines.append(f"__align__(16) {STORAGE[dtypes[0]]} out_v[{v}];")
    lines += [f"__align__(16) {STORAGE[dtype]} {name}_v[{v}];" for name, _, dtype in extra]
    lines.append("#pragma unroll")
    lines.append(f"for (int lane = 0; lane < {v}; ++lane) {{")
    lines += ["    " + line for line in body_lines(program, element_of)]
    lines.append(f"    out_v[lane] = {_stored(program)};")
    lines += [f"    {name}_v[lane] = {_stored(program, vid, dtype)};" for name, vid, dtype in extra]
    lines.append("}")
    lines.append(f"lt_copy_vector<{v * dtypes[0].itemsize}>(out + out_o, out_v);")
    lines += [f"lt_copy_vector<{v * dtype.itemsize}>({name} + {name}_o, {name}_v);" for name, _, dtype in extra]
    return lines


def _mask_loop(program: ElementwiseProgram, layout: CudaLayout, names: list, dtypes: list) -> list[str]:
    """Each thread takes groups of 8 consecutive elements and also writes their ReLU mask byte
    (bit k set when element 8j+k of the result is > 0). A layout of 8-element vectors moves a whole
    group with 16-byte loads; otherwise the group's elements are read one by one."""
    result = f"v{program.result}"
    lines = ["const lt_index groups = (n + 7) / 8;",
             "for (lt_index j = first; j < groups; j += step) {",
             "    unsigned int bits = 0;"]
    scalar = _scalar_step(program, layout, names, dtypes, "i") + [f"bits |= ({result} > 0 ? 1u : 0u) << lane;"]
    fallback = ["for (int lane = 0; lane < 8; ++lane) {",
                "    const lt_index i = j * 8 + lane;",
                "    if (i < n) {",
                *_indent(scalar, 2),
                "    }",
                "}"]
    if layout.vector == 8:
        vector = ["const lt_index i = j * 8;"] + _vector_step(program, layout, names, dtypes)
        at = vector.index(f"    out_v[lane] = {_stored(program)};")
        vector.insert(at + 1, f"    bits |= ({result} > 0 ? 1u : 0u) << lane;")
        lines += ["    if (j * 8 + 8 <= n) {", *_indent(vector, 2), "    } else {", *_indent(fallback, 2), "    }"]
    else:
        lines += _indent(fallback, 1)
    lines += ["    mask[j] = (unsigned char)bits;", "}"]
    return lines


def _row_loop(program: ElementwiseProgram, layout: CudaLayout, dtypes: list) -> list[str]:
    """The row loop of a 2-D (rows, channels) layout: the step is a multiple of the chunks of
    `vector` channels in a row (the host sizes the grid so), so each thread's chunk never changes.
    Per-channel operands (access (0, 1)) and row-constant ones ((0, 0)) are read once, converted to
    their register type; each iteration then moves `rows` rows of the contiguous operands, every
    load issued before the first store. With a ReLU mask the vector is one mask group (8 elements):
    step j writes mask byte j."""
    v, u = layout.vector, layout.rows
    result = f"v{program.result}"
    lines = [f"const lt_index nv = n / {v};",
             f"const lt_index c0 = (first % (e1 / {v})) * {v};    // this thread's channels, for good"]
    for k, acc in enumerate(layout.access[1:]):
        if not layout.hoisted(k + 1):
            continue
        dtype = dtypes[k + 1]
        reg = "float" if dtype in _HALVES else STORAGE[dtype]
        if acc[1] == 0:
            lines.append(f"const {reg} in{k}_c = {register_value(f'in{k}[0]', dtype)};")
            continue
        lines += [f"{reg} in{k}_c[{v}];",
                  "{",
                  f"    __align__(16) {STORAGE[dtype]} raw[{v}];",
                  f"    lt_copy_vector<{v * dtype.itemsize}>(raw, in{k} + c0);",
                  "    #pragma unroll",
                  f"    for (int lane = 0; lane < {v}; ++lane) in{k}_c[lane] = {register_value('raw[lane]', dtype)};",
                  "}"]

    def rows(count: int) -> list[str]:
        """`count` steps j, j + step, ...: all loads, then per step the arithmetic and the stores."""
        out = []
        at = ["j"] + [f"j + {r} * step" for r in range(1, count)]     # the vector index of each step
        for r in range(count):
            out.append(f"const lt_index i{r} = ({at[r]}) * {v};")
            for k, acc in enumerate(layout.access[1:]):
                if acc == CONTIGUOUS:
                    st = STORAGE[dtypes[k + 1]]
                    out.append(f"__align__(16) {st} in{k}_v{r}[{v}];")
                    out.append(f"lt_copy_vector<{v * dtypes[k + 1].itemsize}>(in{k}_v{r}, in{k} + i{r});")
        for r in range(count):
            def element_of(k):
                if layout.access[k + 1] == CONTIGUOUS:
                    return register_value(f"in{k}_v{r}[lane]", dtypes[k + 1])
                return f"in{k}_c[lane]" if layout.access[k + 1][1] == 1 else f"in{k}_c"
            step = [f"__align__(16) {STORAGE[dtypes[0]]} out_v[{v}];"]
            if program.relu_mask:
                step.append("unsigned int bits = 0;")
            step += ["#pragma unroll", f"for (int lane = 0; lane < {v}; ++lane) {{"]
            step += _indent(body_lines(program, element_of), 1)
            step.append(f"    out_v[lane] = {_stored(program)};")
            if program.relu_mask:
                step.append(f"    bits |= ({result} > 0 ? 1u : 0u) << lane;")
            step.append("}")
            step.append(f"lt_copy_vector<{v * dtypes[0].itemsize}>(out + i{r}, out_v);")
            if program.relu_mask:
                step.append(f"mask[{at[r]}] = (unsigned char)bits;")
            out += ["{", *_indent(step, 1), "}"]
        return out

    lines += ["lt_index j = first;",
              f"for (; j + {u - 1} * step < nv; j += {u} * step) {{",
              *_indent(rows(u), 1),
              "}"]
    if u > 1:
        lines += ["for (; j < nv; j += step) {", *_indent(rows(1), 1), "}"]
    return lines


def _indent(lines: list, depth: int) -> list:
    return ["    " * depth + line if line else line for line in lines]


def render_cuda(program: ElementwiseProgram, layout: CudaLayout) -> CudaSource:
    n_in = program.n_inputs
    names = operand_names(program)
    dtypes = [program.out_dtype] + [np.dtype(d) for d in program.operand_dtypes()]
    index_t, uindex_t = ("long long", "unsigned long long") if layout.index64 else ("int", "unsigned int")
    float16, bfloat16 = uses_float16(program), uses_bfloat16(program)

    params = [f"{STORAGE[dtypes[0]]}* out"]
    if program.relu_mask:
        params.append("unsigned char* mask")
    params += [f"const {STORAGE[dtypes[k + 1]]}* in{k}" for k in range(n_in)]
    params += [f"{STORAGE[dtype]}* {name}" for name, _, dtype in _extra_outputs(program)]
    params += scalar_parameters(program)
    params.append(f"const {index_t} n")
    params += [f"const {index_t} e{d}" for d in layout.extent_dims()]
    params += [f"const {index_t} {names[k]}_s{d}" for k, d in layout.stride_args()]

    body = [f"typedef {index_t} lt_index;", f"typedef {uindex_t} lt_uindex;",
            "const lt_index first = (lt_index)(blockIdx.x * blockDim.x + threadIdx.x);",
            "const lt_index step = (lt_index)(gridDim.x * blockDim.x);"]
    v = layout.vector
    if layout.rows:
        body += _row_loop(program, layout, dtypes)
    elif program.relu_mask:
        body += _mask_loop(program, layout, names, dtypes)
    elif v > 1:
        body.append(f"const lt_index nv = n / {v};")
        body.append("for (lt_index j = first; j < nv; j += step) {")
        body.append(f"    const lt_index i = j * {v};")
        body += _indent(_vector_step(program, layout, names, dtypes), 1)
        body.append("}")
        if layout.has_tail():
            body.append(f"const lt_index i = nv * {v} + first;")
            body.append("if (i < n) {")
            body += _indent(_scalar_step(program, layout, names, dtypes, "i"), 1)
            body.append("}")
    else:
        body.append("for (lt_index i = first; i < n; i += step) {")
        body += _indent(_scalar_step(program, layout, names, dtypes, "i"), 1)
        body.append("}")

    signature = ",\n        ".join(params)
    kernel = "\n".join([
        f'extern "C" __global__ void __launch_bounds__({BLOCK}) {_NAME}(\n        {signature})',
        "{",
        *_indent(body, 1),
        "}",
        ""])
    head = prelude(float16, bfloat16, uses_complex(program))
    name = "lt_" + hashlib.sha1((head + kernel).encode()).hexdigest()[:20]
    kernel = kernel.replace(_NAME, name)
    return CudaSource(name, head + "\n" + kernel, float16, kernel, bfloat16)
