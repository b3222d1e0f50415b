"""A Linear layer's elementwise work around its GEMMs on CUDA, or cuBLASLt epilogues doing it in the
GEMMs (kernels/cuda/cublaslt_gemm.py), chosen by measurement.

Design: docs/design/plans.md, section "lazytensor/plan/heavy/matmul_epilogue.py".
"""
from __future__ import annotations

import os

from lazytensor.plan.measured_choice import MeasuredChoices, device_name
from lazytensor.core.dtypes import is_float

EPILOGUE = "cuBLASLt GEMM with its epilogue"
KERNEL = "cuBLAS GEMM + the fused kernel after it"
DEFAULT_MODE = os.environ.get("LAZYTENSOR_MATMUL_EPILOGUE", "measure")
MODE = DEFAULT_MODE             # "measure", "on" or "off" (set by lazytensor.assign.plans)


def _valid(value) -> bool:
    return isinstance(value, list) and len(value) == 2 and value[0] in (EPILOGUE, KERNEL) and isinstance(value[1], str)


_CHOICES = MeasuredChoices("matmul_epilogue.json", _valid, (KERNEL, "LAZYTENSOR_CBR_TUNE=0: not timed"))


def epilogue_sites(roots) -> tuple:
    """({id(matmul node): (relu node, bias node)}, {id(matmul node): reduce node}, {id(reduce node):
    the node whose planning plans that matmul}) below `roots` (the expressions of one plan). The
    first: relu(matmul(a, b) + bias) whose product and sum have no other reader. The second: a
    weight gradient `matmul(a, g)` and a bias gradient `sum(g, axis=0)` of the same g (lt.grad of a
    Linear layer gives both), so that the GEMM's BGRAD epilogue writes the sum; the third lets a
    sum planned first plan its matmul (or the transposed view of it the plan reads) before it.
    Only heavy nodes are walked (a matmul and a reduction are heavy, and so is everything above one)."""
    parents: dict = {}
    relus, matmuls, sums, viewers, seen = [], [], {}, {}, set()
    stack = [r for r in roots if getattr(r, "heavy", False)]
    for r in stack:
        parents[id(r)] = parents.get(id(r), 0) + 1         # a result reads its root
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op == "relu":
            relus.append(node)
        elif node.op == "matmul":
            matmuls.append(node)
        elif node.op == "reduce" and _column_sum(node):
            sums[id(node.args[0])] = node
        elif node.op == "materialize" and getattr(node.args[0], "op", None) == "matmul":
            viewers[id(node.args[0])] = node        # a weight gradient read transposed
        for a in node.args:
            if getattr(a, "heavy", False):
                parents[id(a)] = parents.get(id(a), 0) + 1
                stack.append(a)
    relu_sites = {}
    for relu in relus:
        site = _site(relu, parents)
        if site is not None:
            relu_sites[id(site[0])] = (relu, site[1])
    bgrad_sites, planned_by = {}, {}
    for mm in matmuls:
        total = sums.get(id(mm.args[1]))
        if (total is not None and id(mm) not in relu_sites and len(mm.shape) == 2 and len(mm.args[0].shape) == 2
                and total.dtype == mm.dtype):
            bgrad_sites[id(mm)] = total
            planned_by[id(total)] = viewers.get(id(mm), mm)
    return relu_sites, bgrad_sites, planned_by


def _column_sum(node) -> bool:
    spec = node.attrs
    return (spec.kind == "sum" and tuple(spec.axes) == (0,) and len(spec.in_shape) == 2
            and node.dtype == node.args[0].dtype and is_float(node.dtype))


def _site(relu, parents):
    (z,) = relu.args
    if getattr(z, "op", None) != "add" or parents.get(id(z)) != 1 or len(z.args) != 2:
        return None
    for mm, bias in (z.args, z.args[::-1]):
        if (getattr(mm, "op", None) == "matmul" and parents.get(id(mm)) == 1 and len(mm.shape) == 2
                and len(mm.args[0].shape) == 2 and len(mm.args[1].shape) == 2
                and tuple(bias.shape) == (mm.shape[1],) and bias.dtype == mm.dtype == relu.dtype
                and is_float(mm.dtype) and hasattr(bias, "heavy")):
            return mm, bias
    return None


def available(backend) -> bool:
    """Whether the planner looks for sites on this backend (cuBLASLt: CUDA only)."""
    return backend.cublas


def choose(gemm, out, trials, kind: str = "relu_bias") -> tuple:
    """-> (EPILOGUE or KERNEL, a note with the measured times or why none were taken). trials() ->
    (run_kernel, run_epilogue, check): each run enqueues one product its way on the current stream
    (on random operands of the plan's layouts, into outputs of their own), check() says why their
    results differ, or None. kind: the epilogue ("relu_bias", or "bgrada" / "bgradb": the bias
    gradient, where KERNEL is a reduction step)."""
    if MODE == "on":
        return EPILOGUE, "LAZYTENSOR_MATMUL_EPILOGUE=on: not timed"
    if MODE == "off":
        return KERNEL, "LAZYTENSOR_MATMUL_EPILOGUE=off: not timed"
    return _CHOICES.choose(_key(gemm, out, kind), lambda: _measured(trials))


def _key(gemm, out, kind) -> str:
    return f"{device_name(out.device.id)}|{kind}|{out.dtype.name}|{tuple(gemm)}"


def _measured(trials):
    try:
        run_kernel, run_epilogue, check = trials()
    except ValueError as e:                 # no trial operands of these layouts: not kept on disk
        return KERNEL, f"not timed: {e}", False
    return _measure(run_kernel, run_epilogue, check)


def _measure(run_kernel, run_epilogue, check):
    """Both ways timed, then their results compared: an epilogue is taken only where it is faster and
    gives the GEMM and kernel's numbers (cuBLASLt's algorithms differ per shape and version)."""
    from lazytensor.kernels.timing import burst_ms
    t_kernel = burst_ms(run_kernel, bursts=3, burst=5, warmup=2)
    try:
        t_epilogue = burst_ms(run_epilogue, bursts=3, burst=5, warmup=2)
    except (RuntimeError, OSError) as e:    # cuBLASLt refused (no algorithm, a status): not kept on disk
        return KERNEL, f"cuBLASLt failed: {e}; GEMM + kernel {t_kernel:.3f} ms", False
    times = f"GEMM + kernel {t_kernel:.3f} ms, epilogue {t_epilogue:.3f} ms"
    wrong = check()
    if wrong is not None:                   # not kept on disk: measured again by the next process
        return KERNEL, f"cuBLASLt's epilogue is not used: {wrong}; {times}", False
    choice = EPILOGUE if t_epilogue < t_kernel else KERNEL
    return choice, f"measured: {times}, the same numbers", True
