"""Planning matmul: one library call per matmul node (NumPy's BLAS on the CPU, cuBLAS GEMM on CUDA,
called without allocation where kernels/cuda/cublas_gemm.py takes the arrays, else cupy.matmul). The operands are evaluated first where they are expressions (strided views of
tensors, such as w.T, are passed as they are: BLAS takes transposes without a copy); elementwise
work above the matmul (`relu(x @ w + b)`) fuses into the plan's next kernel, which reads the
matmul's result, or, on CUDA where it measures faster, into the GEMM itself: a cuBLASLt GEMM whose
epilogue adds the bias and applies the ReLU (lazytensor.plan.heavy.matmul_epilogue says where and how
it is chosen).
"""
from __future__ import annotations

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import Expr, apply
from lazytensor.kernels.cuda.cublas_gemm import arguments_for, math_words as gemm_math_words
from lazytensor.kernels.cuda.cublaslt_gemm import bgrad_kind, bgrad_refusal, epilogue_refusal, run_epilogue_gemm
from lazytensor.kernels.matmul import cpu_float16_kernel, run_matmul
from lazytensor.kernels.ops import BFLOAT16
from lazytensor.plan.heavy import matmul_epilogue
from lazytensor.core.memory import may_overlap
from lazytensor.plan.elementwise import copy_step, elementwise_steps
from lazytensor.plan.evaluated import materialized
from lazytensor.plan.heavy.reduce import build_reduce
from lazytensor.plan.steps import Step


class MatmulStep(Step):
    """out = a @ b (np.matmul semantics; a, b and out of one dtype). On CUDA, `gemm` holds cuBLAS's
    arguments where cuBLAS takes the arrays as they are (lazytensor.kernels.cuda.cublas_gemm: no
    allocation in the call, so the step can be captured), else None and `why` says why not.
    `kind` names a cuBLASLt epilogue (lazytensor.plan.heavy.matmul_epilogue): "relu_bias", out =
    relu(a @ b + bias), `bias` its input; "bgrada" / "bgradb", out = a @ b and `bias` (an output)
    = b.sum(axis=0). `epilogue` says what was chosen for a site, and why."""
    __slots__ = ("backend", "a", "b", "out", "note", "gemm", "why", "bias", "kind", "epilogue")

    def __init__(self, backend, a, b, out, note="", bias=None, kind="", epilogue=""):
        self.backend, self.a, self.b, self.out, self.note = backend, a, b, out, note
        # The arguments depend on shapes and strides only, which a recipe's signature fixes.
        self.gemm, self.why = arguments_for(a, b, out) if backend.cublas or kind else (None, None)
        self.bias, self.kind, self.epilogue = bias, kind, epilogue

    def run(self):
        if self.kind:
            run_epilogue_gemm(self.gemm, self.a, self.b, self.bias, self.out, self.kind)
        else:
            run_matmul(self.backend, self.a, self.b, self.out, self.gemm)

    def capture_refusal(self):
        if not self.backend.graphs:
            return f"the {self.backend.name} backend has no graphs"
        if self.gemm is not None:
            return None
        # cupy.matmul may allocate (a contiguous copy of a strided operand, a vector product's
        # result) inside the call: memory a captured graph would not own.
        return f"cupy.matmul may allocate inside the call (cuBLAS is not called directly for {self.why})"

    def describe(self, source: bool = True) -> str:
        if self.backend.host_memory and cpu_float16_kernel(self.a, self.b):
            how = ("float16 kernel (NumPy has no float16 BLAS; float32 sums in NumPy's order, rounded once: "
                   "NumPy's numbers)")
        elif self.backend.host_memory and self.out.dtype == BFLOAT16:
            how = "NumPy matmul (BLAS) of the float32 upcasts, rounded once to bfloat16"
        elif self.backend.host_memory:
            how = "NumPy matmul (BLAS)"
        elif self.gemm is not None:
            how = f"cuBLAS {'strided batched ' if self.gemm.batch > 1 else ''}GEMM ({_layouts(self.gemm)}; no allocation: capturable)"
        else:
            how = f"cupy.matmul (cuBLAS; not called directly for {self.why})"
        if self.kind:
            how = f"cuBLASLt GEMM ({_layouts(self.gemm)}; no allocation: capturable)"
        if self.kind == "relu_bias":
            after = (f"relu(a @ b + bias) by the GEMM's RELU_BIAS epilogue, bias {self.bias.shape}: the activation "
                     f"is written once, nothing reads the product back ({self.epilogue})")
        elif self.kind:
            after = (f"and the bias gradient b.sum(axis=0) {self.bias.shape} by the GEMM's {self.kind.upper()} "
                     f"epilogue, summing b as the GEMM reads it: no reduction step ({self.epilogue})")
        elif self.epilogue:
            after = self.epilogue
        else:
            after = "no cuBLASLt epilogue: elementwise work on the result runs in the next fused kernel"
        if not self.backend.host_memory and (self.gemm is not None or self.kind):
            how += f"; math: {gemm_math_words(self.out.dtype)}"
        text = (f"Matmul on {self.backend.name}: {self.a.shape} @ {self.b.shape} -> {self.out.shape} "
                f"{self.out.dtype}: {how}; {after}")
        if self.note:
            text += f"\n  note: {self.note}"
        return text


def _layouts(g) -> str:
    """How the operands and result go to cuBLAS, in the user's terms."""
    # A row-major result: cuBLAS's A' is b and op T means a transposed view; a transposed result
    # (C^T = B^T A^T): cuBLAS's A' is a and op N means a transposed view.
    view = 1 if g.first == "b" else 0
    views = {"b" if g.first == "b" else "a": g.transa == view, "a" if g.first == "b" else "b": g.transb == view}
    said = [f"{name}: a transposed view (op flag, no copy)" for name in ("a", "b") if views[name]]
    if g.first == "a":
        said.append("the result written transposed")
    return ", ".join(said) or "operands and result row-major"


def build_matmul(node, backend, cut, out):
    """The matmul as a step; as the plan's root it writes the destination when that shares no memory
    with its operands (and, on CUDA, cuBLAS takes its layout or it is contiguous: cupy.matmul's out),
    else a temporary then a copy."""
    steps: list = []
    a, b = _operands(node, backend, cut, steps)
    site = getattr(cut, "epilogues", {}).get(id(node))
    why = ""
    if site is not None:
        taken, why = _with_epilogue(node, site, a, b, backend, cut, steps)
        if taken is not None:
            return steps, taken
    direct = (out is not None and not any(may_overlap(out, t.data) for t in (a, b))
              and (backend.host_memory or out.flags.c_contiguous or arguments_for(a.data, b.data, out)[0] is not None))
    y = out if direct else backend.empty(tuple(node.shape), node.dtype)
    steps.append(_product_step(node, a, b, y, backend, cut, why))
    if out is not None and not direct:
        steps.append(copy_step(backend, y, out, "copy the matmul's result into the destination"))
    return steps, _tensor.Tensor(y, node.device)


def _with_epilogue(node, site, a, b, backend, cut, steps):
    """(the Tensor the matmul node stands for, "") where relu(a @ b + bias) is taken by one cuBLASLt GEMM
    (the relu node then reads its output: `cut.memo`), else (None, why not). Nothing else reads the
    product (matmul_epilogue.epilogue_sites), so the node stands for the activation, which no one reads
    through it. The plan's root relu is written into the destination itself (`cut.root_out`)."""
    relu, bias_node = site
    bias = materialized(cut(bias_node), backend, steps, cut)
    root, out = getattr(cut, "root_out", (None, None))
    if (root is not relu or tuple(out.shape) != tuple(node.shape) or out.dtype != node.dtype
            or any(may_overlap(out, t.data) for t in (a, b, bias))):
        out = backend.empty(tuple(node.shape), node.dtype)
    gemm, why = arguments_for(a.data, b.data, out)
    why = why or epilogue_refusal(gemm, bias.data.shape, bias.data.strides, bias.dtype, out.dtype)
    said = "no cuBLASLt epilogue for relu(a @ b + bias): {}; it runs in the next fused kernel"
    if why:
        return None, said.format(f"cuBLASLt does not take it as it is ({why})")
    choice, note = matmul_epilogue.choose(gemm, out, lambda: _trials(node, a, b, bias, backend))
    if choice != matmul_epilogue.EPILOGUE:
        return None, said.format(f"{matmul_epilogue.KERNEL} ({note})")
    step = MatmulStep(backend, a.data, b.data, out, bias=bias.data, kind="relu_bias", epilogue=note)
    steps.append(step)
    result = _tensor.Tensor(out, node.device)
    cut.memo[id(relu)] = result
    return result, ""


def _trials(node, a, b, bias, backend):
    """(run_kernel, run_epilogue, check) for a relu site: the two ways, each on random operands of the
    plan's layouts and into outputs of its own (timing happens while planning: the destination and the
    plan's arrays are left alone); check() compares the two results."""
    x, y, z = (_random_like(backend, t.data, seed) for seed, t in enumerate((a, b, bias)))
    product, activation, fused_out = (_empty_like(backend, node.shape, node.dtype) for _ in range(3))
    plain = MatmulStep(backend, x, y, product)
    kernel = elementwise_steps(apply("relu", apply("add", _tensor.Tensor(product, node.device), _tensor.Tensor(z, node.device))),
                               activation, backend)
    fused = MatmulStep(backend, x, y, fused_out, bias=z, kind="relu_bias")

    def run_kernel():
        plain.run()
        for s in kernel:
            s.run()
    return run_kernel, fused.run, lambda: _differs(backend, [(activation, fused_out)], x.shape[-1])


def _product_step(node, a, b, out, backend, cut, said, note=""):
    """The MatmulStep writing out = a @ b; where the plan also sums b over its rows (a Linear layer's
    bias gradient beside its weight gradient: matmul_epilogue's bgrad sites) and that measures faster,
    the same GEMM writes the sum by its BGRAD epilogue, and the reduction node reads it (`cut.memo`)."""
    total = getattr(cut, "bgrads", {}).get(id(node))
    if total is None or id(total) in cut.memo:
        return MatmulStep(backend, a.data, b.data, out, note, epilogue=said)
    said = "no cuBLASLt epilogue for the bias gradient b.sum(axis=0): {}; a reduction step computes it"
    gemm, why = arguments_for(a.data, b.data, out)
    summed = getattr(cut, "written_into", {}).get(id(total))     # its segment of a region's gradients
    if summed is None or summed.dtype != total.dtype:
        summed = backend.empty(tuple(total.shape), total.dtype)
    why = why or bgrad_refusal(gemm, summed.shape, summed.strides, summed.dtype, out.dtype)
    if why:
        return MatmulStep(backend, a.data, b.data, out, note, epilogue=said.format(f"cuBLASLt does not take it as it is ({why})"))
    kind = bgrad_kind(gemm)
    choice, how = matmul_epilogue.choose(gemm, out, lambda: _bgrad_trials(total, a, b, out, backend, kind), kind)
    if choice != matmul_epilogue.EPILOGUE:
        return MatmulStep(backend, a.data, b.data, out, note, epilogue=said.format(f"{matmul_epilogue.KERNEL} ({how})"))
    cut.memo[id(total)] = _tensor.Tensor(summed, total.device)
    return MatmulStep(backend, a.data, b.data, out, note, bias=summed, kind=kind, epilogue=how)


def _bgrad_trials(total, a, b, out, backend, kind):
    """(run_kernel, run_epilogue, check) for a bias-gradient site: the GEMM and the reduction step, or
    the GEMM with its BGRAD epilogue, on random operands of the plan's layouts, into outputs of the
    plan's layouts of their own; check() compares the two."""
    x, y = (_random_like(backend, t.data, seed) for seed, t in enumerate((a, b)))
    product, fused_out = (_empty_like(backend, out.shape, out.dtype, out) for _ in range(2))
    summed, fused_sum = (backend.empty(tuple(total.shape), total.dtype) for _ in range(2))
    plain = MatmulStep(backend, x, y, product)
    node = Expr("reduce", (_tensor.Tensor(y, total.device),), total.shape, total.dtype, total.device, True, total.attrs)
    reduction, _ = build_reduce(node, backend, lambda n: n, summed)
    fused = MatmulStep(backend, x, y, fused_out, bias=fused_sum, kind=kind)
    if fused.gemm is None or bgrad_kind(fused.gemm) != kind:
        raise ValueError(f"the trial's layouts differ from the plan's ({fused.gemm})")   # a bug: never time the wrong call

    def run_kernel():
        plain.run()
        for s in reduction:
            s.run()
    return run_kernel, fused.run, lambda: _differs(backend, [(product, fused_out), (summed, fused_sum)], y.shape[0])


def _empty_like(backend, shape, dtype, like=None):
    """A new array of `like`'s layout (a transposed view stays one: the GEMM's arguments are the same)."""
    if like is not None and like.ndim == 2 and not like.flags.c_contiguous and like.T.flags.c_contiguous:
        return backend.empty(tuple(shape)[::-1], dtype).T
    return backend.empty(tuple(shape), dtype)


def _random_like(backend, a, seed):
    """Random values (standard normal) in an array of a's shape, dtype and layout."""
    host = np.random.default_rng(seed).standard_normal(a.shape).astype(a.dtype)
    if a.ndim == 2 and not a.flags.c_contiguous and a.T.flags.c_contiguous:
        return backend.asarray(np.ascontiguousarray(host.T)).T
    out = backend.empty(a.shape, a.dtype) if a.flags.c_contiguous else None
    if out is None:         # another layout (padded rows): the GEMM's leading dimension would differ
        raise ValueError("no trial operand of this layout")
    out[...] = backend.asarray(host)
    return out


def _differs(backend, pairs, k) -> str | None:
    """Why the epilogue's results differ from the GEMM and its kernel's (pairs: (kernel's, epilogue's)),
    or None when they agree to the rounding of sums of k products of standard normal values."""
    for want, got in pairs:
        w = backend.to_host(want).astype(np.float64)
        g = backend.to_host(got).astype(np.float64)
        rel = 2e-2 if want.dtype.itemsize == 2 else 1e-4       # float16, bfloat16 (rounded alike here)
        worst = np.abs(w - g).max(initial=0.0)
        if not np.isfinite(g).all() or not worst <= rel * (np.abs(w).max(initial=0.0) + np.sqrt(k)):
            return f"its result differed from the GEMM and kernel's on random operands (by up to {worst:.3g})"
    return None


def _operands(node, backend, cut, steps):
    return (materialized(cut(node.args[0]), backend, steps, cut),
            materialized(cut(node.args[1]), backend, steps, cut))


def build_transposed_matmul(node, backend, cut, out):
    """`(a @ b).T` (a weight gradient of `x @ w.T`): the product is computed transposed, into a
    temporary of the view's layout (cuBLAS writes C^T = B^T A^T), so that what reads the view reads
    rows, not columns of a temporary (and no transposed copy is made; `out`, where given, is that
    temporary: a weight gradient's segment of a region, cut.into). The matmul node then stands
    for the transposed view of that temporary, should anything else read it. Declines (None) other
    views, and a matmul already planned."""
    x = node.args[0]
    step = node.attrs[0]
    memo = getattr(cut, "memo", None)
    if (getattr(x, "op", None) != "matmul" or len(x.shape) < 2 or not _swaps_last_axes(step, len(x.shape))
            or memo is None or id(x) in memo or x.dtype != node.dtype):
        return None
    if out is not None and not out.flags.c_contiguous:
        return None
    steps: list = []
    a, b = _operands(x, backend, cut, steps)
    y = out if out is not None else backend.empty(tuple(node.shape), node.dtype)
    product = y.swapaxes(-1, -2)                    # x's shape, written through the transposed view
    if not backend.host_memory and arguments_for(a.data, b.data, product)[0] is None:
        return None     # cupy.matmul writes contiguous results only
    steps.append(_product_step(x, a, b, product, backend, cut, "", note="computed transposed, as it is read"))
    memo[id(x)] = _tensor.Tensor(product, x.device)
    return steps, _tensor.Tensor(y, node.device)


def _swaps_last_axes(step, ndim) -> bool:
    kind, arg = step
    return kind == "transpose" and tuple(arg) == (*range(ndim - 2), ndim - 1, ndim - 2)


def build_bias_gradient(node, backend, cut, out):
    """A sum that a weight-gradient GEMM of this plan may write by its BGRAD epilogue (matmul_epilogue's
    bgrad sites): that GEMM is planned first (through the view the plan reads it by, if any), and the
    sum reads what it wrote; else (and as a destination's writer) it declines (None)."""
    first = getattr(cut, "bgrad_first", {}).get(id(node))
    if first is not None and out is None and id(first) not in cut.memo:
        cut(first)
        done = cut.memo.get(id(node))
        if done is not None:
            return [], done
    return None
