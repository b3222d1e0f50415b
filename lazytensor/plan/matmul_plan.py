"""Planning matmul: one library call per matmul node (NumPy's BLAS on the CPU, cuBLAS through
cupy.matmul on CUDA). The operands are evaluated first where they are expressions (strided views of
tensors, such as w.T, are passed as they are: BLAS takes transposes without a copy); elementwise
work above the matmul (`relu(x @ w + b)`) fuses into the plan's next kernel, which reads the
matmul's result. No cuBLASLt epilogue is built: the epilogue is that next kernel.
"""
from __future__ import annotations

from lazytensor.core import tensor as _tensor
from lazytensor.kernels.matmul import run_matmul
from lazytensor.plan.planner import HEAVY, ROOT_WRITERS, copy_step, materialized, may_overlap


class MatmulStep:
    """out = a @ b (np.matmul semantics; a, b and out of one dtype)."""
    __slots__ = ("backend", "a", "b", "out", "note")

    def __init__(self, backend, a, b, out, note=""):
        self.backend, self.a, self.b, self.out, self.note = backend, a, b, out, note

    def run(self):
        run_matmul(self.backend.name, self.a, self.b, self.out)

    def capture_refusal(self):
        if self.backend.name != "cuda":
            return f"the {self.backend.name} backend has no graphs"
        # cupy.matmul may allocate (a contiguous copy of a strided operand, cuBLAS workspace) inside
        # the call: memory a captured graph would not own.
        return "cupy.matmul may allocate inside the call"

    def describe(self, source: bool = True) -> str:
        how = ("NumPy matmul (BLAS)" if self.backend.name == "cpu"
               else "cupy.matmul (cuBLAS)")
        text = (f"Matmul on {self.backend.name}: {self.a.shape} @ {self.b.shape} -> {self.out.shape} "
                f"{self.out.dtype}: {how}; no cuBLASLt epilogue: elementwise work on the result runs in "
                f"the next fused kernel")
        if self.note:
            text += f"\n  note: {self.note}"
        return text


def _build_matmul(node, backend, cut, out):
    """The matmul as a step; as the plan's root it writes the destination when that shares no memory
    with its operands (and, on CUDA, is contiguous: cupy.matmul's out), else a temporary then a copy."""
    steps: list = []
    a = materialized(cut(node.args[0]), backend, steps)
    b = materialized(cut(node.args[1]), backend, steps)
    direct = (out is not None and (backend.name == "cpu" or out.flags.c_contiguous)
              and not any(may_overlap(out, t.data) for t in (a, b)))
    y = out if direct else backend.empty(tuple(node.shape), node.dtype)
    steps.append(MatmulStep(backend, a.data, b.data, y))
    if out is not None and not direct:
        steps.append(copy_step(backend, y, out, "copy the matmul's result into the destination"))
    return steps, _tensor.Tensor(y, node.device)


HEAVY["matmul"] = _build_matmul
ROOT_WRITERS.add("matmul")
