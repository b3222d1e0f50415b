"""Render a fused reduction (an ElementwiseProgram feeding a Reduction) to a numba module.

Design: docs/design/kernels.md, section "kernels/cpu/render_numba_reduce.py".
"""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.ops import BFLOAT16
from lazytensor.kernels.program import ElementwiseProgram, Layout, Reduction
from lazytensor.kernels.cpu.render_numba import (JIT, MODULE_HEADER, STREAM_IMPORT, body_lines, broadcast_element,
                                                  module_header, store_expr)

CHUNKS = 64
LANES = 16      # partial sums per chunk of a full reduction: enough independent adds to hide latency


def strategy(spec: Reduction) -> str:
    nd = len(spec.in_shape)
    kept = [a for a in range(nd) if a not in spec.axes]
    return "rows" if kept and (nd - 1) in spec.axes else "chunks"


def _identity(kind: str, acc: np.dtype) -> str:
    if kind in ("max", "min"):
        if acc.kind == "f":
            return "-np.inf" if kind == "max" else "np.inf"
        if acc.kind == "b":
            return "False" if kind == "max" else "True"
        info = np.iinfo(acc)
        return str(info.min if kind == "max" else info.max)
    return {"sum": "0", "mean": "0", "prod": "1", "any": "False", "all": "True"}[kind]


class _Acc:
    """Source fragments of one accumulator kind; `a` names the state, `v` the value."""

    def __init__(self, spec: Reduction):
        self.spec = spec
        k = spec.kind
        acc = f"np.{spec.acc_dtype.name}"
        self.kind = k
        self.both = False
        if k in ("var", "meanvar"):
            k = self.kind = "var"
            self.both = spec.kind == "meanvar"
            self.state = ("n", "m", "q")
        elif k in ("argmax", "argmin"):
            self.state = ("bv", "bi")
        else:
            self.state = ("a",)
        self.acc = acc

    def init(self, p: str) -> list:
        k, acc = self.kind, self.acc
        if k == "var":
            return [f"{p}n = 0.0", f"{p}m = 0.0", f"{p}q = 0.0"]
        if k in ("argmax", "argmin"):
            return [f"{p}bv = {acc}(0)", f"{p}bi = -1"]
        return [f"{p}a = {acc}({_identity(k, self.spec.acc_dtype)})"]

    def update(self, p: str, v: str, idx: str) -> list:
        k, acc = self.kind, self.acc
        if k in ("sum", "mean"):
            return [f"{p}a += {acc}({v})"]
        if k == "prod":
            return [f"{p}a *= {acc}({v})"]
        if k == "max":
            return [f"x_ = {acc}({v})", f"if x_ > {p}a or x_ != x_:", f"    {p}a = x_"]
        if k == "min":
            return [f"x_ = {acc}({v})", f"if x_ < {p}a or x_ != x_:", f"    {p}a = x_"]
        if k == "any":
            return [f"{p}a = {p}a or bool({v})"]
        if k == "all":
            return [f"{p}a = {p}a and bool({v})"]
        if k == "var":
            return [f"x_ = np.float64({v})", f"{p}n += 1.0", f"d_ = x_ - {p}m", f"{p}m += d_ / {p}n",
                    f"{p}q += d_ * (x_ - {p}m)"]
        cmp = ">" if k == "argmax" else "<"
        return [f"x_ = {acc}({v})",
                f"if {p}bi < 0 or x_ {cmp} {p}bv or (x_ != x_ and {p}bv == {p}bv):",
                f"    {p}bv = x_", f"    {p}bi = {idx}"]

    def combine(self, p: str, q: str) -> list:
        """Fold state `q` (a later chunk) into state `p`."""
        k = self.kind
        if k in ("sum", "mean"):
            return [f"{p}a += {q}a"]
        if k == "prod":
            return [f"{p}a *= {q}a"]
        if k in ("max", "min"):
            cmp = ">" if k == "max" else "<"
            return [f"if {q}a {cmp} {p}a or {q}a != {q}a:", f"    if {p}a == {p}a:", f"        {p}a = {q}a"]
        if k == "any":
            return [f"{p}a = {p}a or {q}a"]
        if k == "all":
            return [f"{p}a = {p}a and {q}a"]
        if k == "var":
            return [f"if {q}n > 0.0:", f"    t_ = {p}n + {q}n", f"    d_ = {q}m - {p}m",
                    f"    {p}m += d_ * {q}n / t_", f"    {p}q += {q}q + d_ * d_ * {p}n * {q}n / t_",
                    f"    {p}n = t_"]
        cmp = ">" if k == "argmax" else "<"
        return [f"if {q}bi >= 0 and ({p}bi < 0 or {q}bv {cmp} {p}bv or ({q}bv != {q}bv and {p}bv == {p}bv)):",
                f"    {p}bv = {q}bv", f"    {p}bi = {q}bi"]

    def stores(self, p: str, o: str, k: str, nk: str, store) -> list:
        """Statements storing the result for kept element `k` into the flat output `o`."""
        if self.both:
            r = f"{p}q / max(count - {self.spec.ddof}, 0.0)"
            return [f"{o}[{k}] = {store(f'{p}m')}", f"{o}[{nk} + {k}] = {store(r)}"]
        return [f"{o}[{k}] = {store(self.result(p))}"]

    def result(self, p: str) -> str:
        k = self.kind
        if k == "mean":
            if self.spec.acc_dtype.kind == "c":     # NumPy's quotient of complex by the count (Smith's)
                return f"np.divide({p}a, np.complex128(count))"
            return f"np.float64({p}a) / count"
        if k == "var":
            r = f"{p}q / max(count - {self.spec.ddof}, 0.0)"
            return f"np.sqrt({r})" if self.spec.root else r
        if k in ("argmax", "argmin"):
            return f"{p}bi"
        return f"{p}a"


def render_numba_reduce(program: ElementwiseProgram, spec: Reduction, layout: Layout) -> str:
    """The module: parallel functions (reduce_main, reduce_finish) for large inputs, and serial
    twins (reduce_main_seq, reduce_finish_seq) for small ones, which also compile several times
    faster. numba compiles only the variant that is called."""
    parallel = _render(program, spec, layout, True)
    serial = _render(program, spec, layout, False)
    header = module_header([parallel, serial])
    if "lt_block_buffer(" in parallel:
        header.insert(len(MODULE_HEADER) - 1, STREAM_IMPORT)
    return "\n".join(header + [parallel, serial])


def _render(program: ElementwiseProgram, spec: Reduction, layout: Layout, parallel: bool) -> str:
    loop = "prange" if parallel else "range"
    suffix = "" if parallel else "_seq"
    jit = JIT.format(parallel=parallel)
    nd = len(spec.in_shape)
    axes = spec.axes
    kept = [d for d in range(nd) if d not in axes]
    acc = _Acc(spec)
    n_in = program.n_inputs
    idx = [f"i{d}" for d in range(nd)]
    ext = [f"n{d}" for d in range(nd)]
    scalars = [f"s{i}" for i in range(len(program.scalar_dtypes))]
    from lazytensor.kernels.cpu.render_numba import convert
    prologue = [f"c{i} = {convert(f's{i}', dt)}" for i, dt in enumerate(program.scalar_dtypes)]

    if layout.flat:
        prologue += [f"x{i} = in{i}.reshape(-1)" for i in range(n_in)]
        flat_index = " + ".join(f"{idx[d]} * {' * '.join(ext[d + 1:]) or '1'}" for d in range(nd)) or "0"
        # An unsigned index: numba then skips its negative-index wraparound, which otherwise keeps
        # LLVM from vectorizing the loop (a per-channel sum ran 5x slower with a signed one).
        element_of = lambda i: f"x{i}[np.uint64({flat_index})]"   # noqa: E731
    else:
        # 0-d inputs read once, before the loops (numba's parallel loops take a 0-d array for a scalar)
        zero_d = {i for i in range(n_in) if not layout.masks[i]} if nd else set()
        prologue += [f"e{i} = in{i}[()]" for i in sorted(zero_d)]
        element = broadcast_element(layout, idx)
        element_of = lambda i: f"e{i}" if i in zero_d else element(i)   # noqa: E731
    body = body_lines(program, element_of)
    value = f"v{program.result}"
    arg_idx = idx[axes[0]] if axes else "0"
    store = lambda e: store_expr(e, spec.out_dtype)   # noqa: E731
    params = ", ".join([f"in{i}" for i in range(n_in)] + scalars + ext + ["count"])
    src = []

    if strategy(spec) == "rows":
        src.append(jit)
        src.append(f"def reduce_main{suffix}(out, {params}):")
        lines = list(prologue)
        lines.append("o = out.reshape(-1)")
        lines.append(f"for k in {loop}({' * '.join(ext[d] for d in kept)}):")
        inner = []
        for d in kept:
            later = " * ".join(ext[e] for e in kept if e > d) or "1"
            inner.append(f"{idx[d]} = (k // ({later})) % {ext[d]}")
        inner += acc.init("")
        loop = []
        depth = 0
        for d in axes[:-1]:
            loop.append("    " * depth + f"for {idx[d]} in range({ext[d]}):")
            depth += 1
        last = axes[-1]
        blocked = acc.kind in ("sum", "mean")
        if blocked:
            loop += ["    " * depth + line for line in acc.init("b")]
        loop.append("    " * depth + f"for {idx[last]} in range({ext[last]}):")
        loop += ["    " * (depth + 1) + line for line in body + acc.update("b" if blocked else "", value, arg_idx)]
        if blocked:
            loop += ["    " * depth + line for line in acc.combine("", "b")]
        inner += loop
        inner += acc.stores("", "o", "k", " * ".join(ext[d] for d in kept), store)
        lines += ["    " + line for line in inner]
        src += ["    " + line for line in lines]
        src.append("")
        return "\n".join(src)

    # "chunks": partial states per (chunk, kept element), then an ordered combination.
    r0 = axes[0]
    nk = " * ".join(ext[d] for d in kept) or "1"
    kflat = " + ".join(f"{idx[d]} * {' * '.join(ext[e] for e in kept if e > d) or '1'}" for d in kept) or "0"
    parts = ", ".join(f"p{s}" for s in acc.state)
    src.append(jit)
    src.append(f"def reduce_main{suffix}({parts}, nchunks, {params}):")
    lines = list(prologue)
    lines.append(f"for c in {loop}(nchunks):")
    chunk = [f"lo_ = c * {ext[r0]} // nchunks", f"hi_ = (c + 1) * {ext[r0]} // nchunks"]
    depth = 0
    nest = []
    for d in range(nd):
        rng = "range(lo_, hi_)" if d == r0 else f"range({ext[d]})"
        nest.append("    " * depth + f"for {idx[d]} in {rng}:")
        depth += 1
    if kept:
        # Partial states for every kept element, in chunk-local arrays (cache resident, and
        # provably not aliasing the inputs, so the inner loop vectorizes), copied out at the end.
        types = state_types(spec)
        for st, ty in zip(acc.state, types):
            chunk.append(f"l{st} = np.empty({nk}, np.{np.dtype(ty).name})")
        chunk += [f"for kk in range({nk}):"] + ["    " + line for line in acc.init("")] + \
                 ["    " + f"l{st}[kk] = {st}" for st in acc.state]
        load_state = [f"{st} = l{st}[kk]" for st in acc.state]
        save_state = [f"l{st}[kk] = {st}" for st in acc.state]
        nest += ["    " * depth + line for line in
                 body + [f"kk = {kflat}"] + load_state + acc.update("", value, arg_idx) + save_state]
        nest += [f"for kk in range({nk}):"] + [f"    p{st}[c, kk] = l{st}[kk]" for st in acc.state]
    else:
        # Everything reduced: one state per chunk, kept in locals while the chunk streams by.
        chunk += acc.init("")
        if nd == 1 and acc.kind in ("sum", "mean"):
            # LANES independent partial sums (a fixed lane per element, so still deterministic):
            # one accumulator would chain every add on the previous one's latency.
            # The lanes live on the stack (an alloca: LLVM knows they alias no input), and their
            # loop's trip count is one LLVM cannot see (it is LANES wherever a block runs), so that
            # LLVM vectorizes the lane loop; with range(LANES) it unrolled it into 16 scalar chains.
            nest = [f"lanes = lt_block_buffer(p{acc.state[0]}, {LANES})", f"for u in range({LANES}):",
                    "    lanes[u] = 0", f"nl_ = min({LANES}, hi_ - lo_ + {LANES})",
                    f"nb_ = (hi_ - lo_) // {LANES}", "for bb_ in range(nb_):", f"    b0 = lo_ + bb_ * {LANES}",
                    "    for u in range(nl_):", "        i0 = b0 + u"]
            nest += ["        " + line for line in body]
            nest += [f"        lanes[u] += {acc.acc}({value})",
                     f"for i0 in range(lo_ + nb_ * {LANES}, hi_):"]
            nest += ["    " + line for line in body + acc.update("", value, arg_idx)]
            nest += [f"for u in range({LANES}):", "    a += lanes[u]"]
        else:
            nest += ["    " * depth + line for line in body + acc.update("", value, arg_idx)]
        nest += [f"p{st}[c, 0] = {st}" for st in acc.state]
    chunk += nest
    lines += ["    " + line for line in chunk]
    src += ["    " + line for line in lines]
    src.append("")
    src.append(jit)
    src.append(f"def reduce_finish{suffix}(out, {parts}, nchunks, count):")
    fin = ["o = out.reshape(-1)", f"nk_ = o.shape[0] // {2 if acc.both else 1}", f"for kk in {loop}(nk_):"]
    step = acc.init("") + ["for c in range(nchunks):"]
    step += ["    " + f"q{s} = p{s}[c, kk]" for s in acc.state]
    step += ["    " + line for line in acc.combine("", "q")]
    step += acc.stores("", "o", "kk", "nk_", store)
    fin += ["    " + line for line in step]
    src += ["    " + line for line in fin]
    src.append("")
    if not parallel and not kept and not acc.both and spec.out_dtype not in (np.float16, BFLOAT16):
        # A full reduction's value, returned (float(x.sum()) on small arrays, lazytensor.assign.host_scalar):
        # the same two functions, in one call, without the caller's partial-state and 0-d arrays.
        src.append(jit)
        src.append(f"def reduce_value_seq({params}):")
        body = [f"p{st} = np.empty((1, 1), np.{np.dtype(ty).name})" for st, ty in zip(acc.state, state_types(spec))]
        body += [f"reduce_main_seq({parts}, 1, {params})",
                 f"o_ = np.empty(1, np.{np.dtype(spec.out_dtype).name})",
                 f"reduce_finish_seq(o_, {parts}, 1, count)",
                 "return o_[0]"]
        src += ["    " + line for line in body]
        src.append("")
    return "\n".join(src)


def state_types(spec: Reduction) -> list:
    """dtypes of the partial-state arrays of the "chunks" loop shape, in parameter order."""
    if spec.kind in ("var", "meanvar"):
        return [np.float64, np.float64, np.float64]
    if spec.kind in ("argmax", "argmin"):
        return [spec.acc_dtype, np.int64]
    return [spec.acc_dtype]

