"""Render an ElementwiseProgram to the source of a numba module (the CPU backend compiles it).

The module defines two functions over the same body: `kernel_par` (njit(parallel=True), prange
over the outermost loop) for large arrays and `kernel_seq` for small ones, where waking the thread
pool costs more than the work. Broadcasting and strides are handled by the indexing: a broadcast
dimension of an operand is read at index 0, never materialized. Kernels over one index (flat
layouts, and 1-D ones with broadcast operands) also get `kernel_stream`, the same body writing
through streaming stores, for results larger than the last-level cache (kernels/cpu/stream_stores.py).
"""
from __future__ import annotations

import hashlib
import os

import numpy as np

from lazytensor.kernels.cpu.numba_vector_math import definitions_for
from lazytensor.kernels.ops import BFLOAT16, OPS, kind, real_dtype
from lazytensor.kernels.program import ElementwiseProgram, Layout, output_name
from lazytensor.kernels.cpu.stream_stores import STREAM_BLOCK, STREAM_CHUNKS

_F16 = np.dtype(np.float16)
_BOOL = np.dtype(bool)
_HALVES = (_F16, BFLOAT16)      # held in float32 registers, stored as uint16 bit patterns
_F32_EXACT = frozenset(np.dtype(t) for t in ("float16", "float32"))


MODULE_HEADER = ("import math", "import numpy as np", "from numba import njit, prange",
                 "from lazytensor.kernels.cpu.numba_prelude import *", "")
JIT = "@njit(parallel={parallel}, cache=True, error_model='numpy', boundscheck=False, nogil=True)"

# The kernels' names hash their source: the hash of the streaming stores' module, written into the
# import line, renames the kernels using them when it changes (numba's cache checks only the kernel's
# own module).
with open(os.path.join(os.path.dirname(__file__), "numba_stream.py"), "rb") as _stream:
    STREAM_IMPORT = ("from lazytensor.kernels.cpu.numba_stream import lt_block_buffer, lt_store_fence, lt_stream_copy  # "
                     + hashlib.sha1(_stream.read()).hexdigest()[:12])


def module_header(code: list[str]) -> list[str]:
    """The lines a kernel module starts with: the imports, then the vectorizing float32 helpers
    (kernels/cpu/numba_vector_math.py) that `code` calls, written into the module itself."""
    return list(MODULE_HEADER) + definitions_for("\n".join(code))


def register_type(dtype: np.dtype) -> str:
    """The numba constructor of the type a value of `dtype` is held in (float16 and bfloat16 live in float32)."""
    dtype = np.dtype(dtype)
    return "np.float32" if dtype in _HALVES else f"np.{dtype.name}"


def convert(expr: str, dtype: np.dtype, src: np.dtype | None = None) -> str:
    """Round or wrap a value to `dtype`, as NumPy's casting does. bfloat16: a value of an op (or a
    float16/32 one) rounds from float32, a float64 or integer `src` once from float64, as ml_dtypes;
    a bfloat16 value cast to an integer is truncated, 0 where out of range or NaN (ml_dtypes')."""
    dtype = np.dtype(dtype)
    if src is not None and src.kind == "c" and dtype.kind != "c":
        if dtype == _BOOL:
            return f"({expr} != 0)"
        expr, src = f"({expr}).real", real_dtype(src)     # NumPy's cast drops the imaginary part
    if dtype == _F16:
        return f"lt_round_f16({expr})"
    if dtype == BFLOAT16:
        return f"lt_round_bf16({expr})" if src is None or src in _F32_EXACT else f"lt_round_bf16_d({expr})"
    if dtype == _BOOL:
        return f"bool({expr})"
    if src == BFLOAT16 and dtype.kind in "iu":
        info = np.iinfo(dtype)
        return f"np.{dtype.name}(lt_bf16_to_int({expr}, {float(info.min)!r}, {float(info.max) + 1.0!r}))"
    if dtype.kind in "iu" and src is not None and src.kind == "f":
        return _float_to_int(expr, dtype)
    return f"np.{dtype.name}({expr})"


def _float_to_int(expr: str, dtype: np.dtype) -> str:
    """A float cast to an integer dtype as NumPy's C casts do on x86 (CUDA's lt_float_to_int does the
    same): to 8 and 16 bits through int32, to uint32 through int64, to uint64 through int64 where
    negative; so -1.0 is 255 as uint8. LLVM's direct conversion to a narrow or unsigned type is
    undefined there, and its vectorized loop gave 0 where the scalar one gave 255."""
    if dtype.itemsize < 4:
        return f"np.{dtype.name}(np.int32({expr}))"
    if dtype.kind == "u" and dtype.itemsize == 4:
        return f"np.uint32(np.int64({expr}))"
    if dtype.kind == "u":
        return f"lt_float_to_uint64({expr})"
    return f"np.{dtype.name}({expr})"


def _load(expr: str, dtype: np.dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == _F16:
        return f"lt_h2f({expr})"
    return f"lt_bf2f({expr})" if dtype == BFLOAT16 else expr


def store_expr(expr: str, dtype: np.dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == _F16:
        return f"lt_f2h({expr})"
    if dtype == BFLOAT16:
        return f"lt_f2bf({expr})"
    return convert(expr, dtype)


def broadcast_element(layout: Layout, idx: list):
    """element_of for body_lines: input i read at the loop indices `idx`, with index 0 along its
    broadcast dimensions (and none for the leading ones it lacks)."""
    nd = len(idx)

    def element_of(i):
        mask = layout.masks[i]
        off = nd - len(mask)
        subs = [idx[off + d] if varies else "0" for d, varies in enumerate(mask)]
        return f"in{i}[{', '.join(subs) if subs else '()'}]"
    return element_of


def body_lines(program: ElementwiseProgram, element_of) -> list[str]:
    """Straight-line statements computing every value; `element_of(i)` reads input i's element."""
    dtypes = [np.dtype(ins[1]) for ins in program.instrs]
    lines = []
    for vid, (op, dtype, *args) in enumerate(program.instrs):
        if op == "load":
            rhs = _load(element_of(args[0]), dtype)
        elif op == "scalar":
            rhs = f"c{args[0]}"
        elif op == "astype":
            rhs = convert(f"v{args[0]}", dtype, dtypes[args[0]])
        else:
            kinds = "".join(kind(dtypes[a]) for a in args)
            if len(set(kinds)) == 1:
                kinds = kinds[0]
            bits = dtypes[args[0]].itemsize * 8
            snippet = OPS[op].snippet("py", kinds, bits, dtypes[args[-1]] == BFLOAT16)
            loop_t = register_type(dtypes[args[0]])
            rhs = convert(snippet.format(*(f"v{a}" for a in args), T=loop_t, N=bits), dtype)
        lines.append(f"v{vid} = {rhs}")
    return lines


def render_numba(program: ElementwiseProgram, layout: Layout) -> str:
    n_in = program.n_inputs
    stores = program.stores()
    extra = [output_name(k) for k in range(1, len(stores))]     # a program with several outputs
    params = (["out"] + [f"in{i}" for i in range(n_in)] + extra
              + [f"s{i}" for i in range(len(program.scalar_dtypes))])
    prologue = [f"c{i} = {convert(f's{i}', dt)}" for i, dt in enumerate(program.scalar_dtypes)]
    result = store_expr(f"v{program.result}", program.out_dtype)

    if layout.flat:
        prologue += ["o = out.reshape(-1)"] + [f"x{i} = in{i}.reshape(-1)" for i in range(n_in)]
        prologue += [f"o{k} = {name}.reshape(-1)" for k, name in enumerate(extra, 1)]
        body = body_lines(program, lambda i: f"x{i}[i]")
        loops = [("i", "o.shape[0]")]
        targets = ["o[i]"] + [f"o{k}[i]" for k in range(1, len(stores))]
    else:
        nd = layout.ndim
        idx = [f"i{d}" for d in range(nd)]
        # A 0-d input is read once, before the loops: numba's parallel loops take a 0-d array for a
        # scalar inside the loop body, where in0[()] then fails to compile.
        zero_d = {i for i in range(n_in) if not layout.masks[i]} if nd else set()
        prologue += [f"e{i} = in{i}[()]" for i in sorted(zero_d)]
        element = broadcast_element(layout, idx)
        body = body_lines(program, lambda i: f"e{i}" if i in zero_d else element(i))
        loops = [(idx[d], f"out.shape[{d}]") for d in range(nd)]
        at = f"[{', '.join(idx) if idx else '()'}]"
        targets = [name + at for name in ["out"] + extra]
    # stores after every value: an output may overwrite an input its own value reads at this index
    store = [f"{target} = {store_expr(f'v{vid}', dtype)}" for target, (vid, dtype) in zip(targets, stores)]

    if program.relu_mask:
        return _render_with_mask(program, layout, params, prologue, body, result)
    src = module_header(body)
    streams = layout.ndim >= 1 and (layout.flat or layout.ndim == 1)
    if streams:
        src.insert(len(MODULE_HEADER) - 1, STREAM_IMPORT)
    for name, parallel in (("kernel_par", True), ("kernel_seq", False)):
        src.append(JIT.format(parallel=parallel))
        src.append(f"def {name}({', '.join(params)}):")
        src += ["    " + line for line in prologue]
        depth = 1
        for d, (var, extent) in enumerate(loops):
            rng = "prange" if parallel and d == 0 else "range"
            src.append("    " * depth + f"for {var} in {rng}({extent}):")
            depth += 1
        if not loops:
            src.append("    if True:")
            depth += 1
        src += ["    " * depth + line for line in body + store]
        src.append("")
    if streams:
        src += _render_stream(program, layout, params, prologue)
    return "\n".join(src)


def _render_stream(program, layout, params, prologue) -> list[str]:
    """kernel_stream(..., head_): from element head_ (where every output reaches a 32-byte boundary)
    on, the whole blocks of STREAM_BLOCK elements, split in chunks between the threads: each block is
    computed with ordinary (vectorized) stores into buffers on the stack, then copied to its outputs
    with streaming stores (kernels/cpu/numba_stream.py). The elements before head_ and after the last
    whole block are computed afterwards, by one serial loop with ordinary stores."""
    n_in = program.n_inputs
    stores = program.stores()
    if layout.flat:
        outs = ["o"] + [f"o{k}" for k in range(1, len(stores))]
        varying = list(range(n_in))
        whole = [f"x{i}" for i in range(n_in)]
    else:
        outs = ["out"] + [output_name(k) for k in range(1, len(stores))]
        varying = [i for i in range(n_in) if layout.masks[i] == (True,)]
        whole = [f"in{i}" for i in range(n_in)]

    def element_from(arrays):
        def element(i):
            if i in varying:
                return f"{arrays[i]}[i_]"
            return f"in{i}[0]" if layout.masks[i] else f"e{i}"
        return element
    block = STREAM_BLOCK
    lines = [JIT.format(parallel=True), f"def kernel_stream({', '.join(params + ['head_'])}):"]
    lines += ["    " + line for line in prologue]
    lines += [f"    n_ = {outs[0]}.shape[0]",
              f"    nblocks_ = (n_ - head_) // {block}",
              f"    nchunks_ = min(nblocks_, {STREAM_CHUNKS})",
              "    for c_ in prange(nchunks_):",
              f"        lo_ = head_ + c_ * nblocks_ // nchunks_ * {block}",
              f"        hi_ = head_ + (c_ + 1) * nblocks_ // nchunks_ * {block}"]
    lines += [f"        y{i}_ = {whole[i]}[lo_:hi_]" for i in varying]
    lines += [f"        b{k}_ = lt_block_buffer({name}, {block})" for k, name in enumerate(outs)]
    # (a constant trip count: the vectorized loop has no remainder to handle)
    lines += [f"        for blk_ in range((hi_ - lo_) // {block}):",
              f"            for j_ in range({block}):",
              f"                i_ = blk_ * {block} + j_"]
    lines += ["                " + line for line in body_lines(program, element_from({i: f"y{i}_" for i in varying}))]
    lines += [f"                b{k}_[j_] = {store_expr(f'v{vid}', dtype)}" for k, (vid, dtype) in enumerate(stores)]
    lines += [f"            lt_stream_copy({name}, lo_ + blk_ * {block}, b{k}_)" for k, name in enumerate(outs)]
    lines += ["        lt_store_fence()",
              f"    tail_ = head_ + nblocks_ * {block}",
              "    for e_ in range(head_ + n_ - tail_):",
              "        i_ = e_ if e_ < head_ else e_ - head_ + tail_"]
    lines += ["        " + line for line in body_lines(program, element_from(whole))]
    lines += [f"        {name}[i_] = {store_expr(f'v{vid}', dtype)}" for name, (vid, dtype) in zip(outs, stores)]
    lines.append("")
    return lines


def _render_with_mask(program, layout, params, prologue, body, result) -> str:
    """Elements in groups of 8, in C order of the (contiguous) destination: each group also yields one
    byte of the packed ReLU mask. Broadcast operands are read through the unravelled index."""
    params = params[:1] + ["mask"] + params[1:]
    if not layout.flat and layout.ndim:
        return _render_with_mask_nested(program, layout, params, prologue, body, result)
    if layout.flat:
        index = []
    else:
        nd = layout.ndim
        prologue = [line for line in prologue if not line.startswith(("o = ", "x"))]
        prologue = prologue + ["o = out.reshape(-1)"]
        index = [f"i{d} = (i // ({' * '.join(f'out.shape[{e}]' for e in range(d + 1, nd)) or '1'})) % out.shape[{d}]"
                 for d in range(nd)]
    src = module_header(body)
    for name, parallel in (("kernel_par", True), ("kernel_seq", False)):
        src.append(JIT.format(parallel=parallel))
        src.append(f"def {name}({', '.join(params)}):")
        src += ["    " + line for line in prologue]
        src.append("    n_ = o.shape[0]")
        src.append(f"    for j in {'prange' if parallel else 'range'}((n_ + 7) // 8):")
        src.append("        bits = 0")
        src.append("        for b in range(8):")
        src.append("            i = j * 8 + b")
        src.append("            if i < n_:")
        src += ["                " + line for line in index + body]
        src.append(f"                o[i] = {result}")
        # branchless: a data-dependent branch here cost 20x on ReLU outputs (half of them zero)
        src.append(f"                bits |= (1 if v{program.result} > 0 else 0) << b")
        src.append("        mask[j] = np.uint8(bits)")
        src.append("")
    return "\n".join(src)


def _render_with_mask_nested(program, layout, params, prologue, body, result) -> str:
    """Broadcast operands: the loops of the plain kernel (one per destination axis, innermost
    contiguous), with the flat index counted along, and the mask byte written when its 8th bit is
    in. Unravelling the flat index per element instead (a division and a remainder per axis) made
    this kernel some 100x slower than the same kernel without the mask.
    kernel_par splits the outermost axis across threads: each iteration starts a fresh byte, so
    the launcher takes it only when one outer slice holds a multiple of 8 elements (else kernel_seq,
    whose bits run on across slices)."""
    nd = layout.ndim
    idx = [f"i{d}" for d in range(nd)]
    src = module_header(body)
    for name, parallel in (("kernel_par", True), ("kernel_seq", False)):
        src.append(JIT.format(parallel=parallel))
        src.append(f"def {name}({', '.join(params)}):")
        src += ["    " + line for line in prologue]
        src.append("    slab_ = out.size // out.shape[0] if out.shape[0] else 0")
        if not parallel:
            src += ["    base_ = 0", "    j_ = 0", "    bits = 0"]
        depth = 1
        for d in range(nd):
            rng = "prange" if parallel and d == 0 else "range"
            src.append("    " * depth + f"for {idx[d]} in {rng}(out.shape[{d}]):")
            depth += 1
            if parallel and d == 0:
                # a counter local to the iteration (numba's parfor made a counter initialised
                # from the outer index 7x slower)
                src += ["    " * depth + f"base_ = {idx[0]} * slab_", "    " * depth + "j_ = 0",
                        "    " * depth + "bits = 0"]
        pad = "    " * depth
        src += [pad + line for line in body]
        src.append(pad + f"out[{', '.join(idx)}] = {result}")
        src.append(pad + f"bits |= (1 if v{program.result} > 0 else 0) << (j_ & 7)")   # branchless, as above
        src.append(pad + "if (j_ & 7) == 7:")
        src.append(pad + "    mask[(base_ + j_) >> 3] = np.uint8(bits)")
        src.append(pad + "    bits = 0")
        src.append(pad + "j_ += 1")
        if not parallel:
            src.append("    if j_ & 7:")
            src.append("        mask[j_ >> 3] = np.uint8(bits)")
        src.append("")
    return "\n".join(src)
