"""Planning linalg nodes (lazytensor.ops.decompositions): one library call per node, NumPy's LAPACK on
the CPU and cuSOLVER through CuPy on CUDA (kernels/linalg.py). Operands are evaluated first (the
elementwise work feeding them fuses into that kernel); the work reading the results fuses into the
next kernel. The results of one call that a plan reads through several nodes (eigh's eigenvalues
and eigenvectors) come from one step.

Design: docs/design/linalg.md, section "lazytensor/plan/heavy/linalg.py".
"""
from __future__ import annotations

from lazytensor.core.tensor import Tensor
from lazytensor.kernels.linalg import run_linalg
from lazytensor.plan.elementwise import copy_step
from lazytensor.plan.evaluated import materialized
from lazytensor.plan.steps import Step


class LinalgStep(Step):
    """out[k][...] = the k-th result of linalg function `fn` (with `params`) over `inputs`."""
    __slots__ = ("backend", "fn", "params", "inputs", "out", "note")

    def __init__(self, backend, fn, params, inputs, out, note=""):
        self.backend, self.fn, self.params, self.inputs, self.out, self.note = backend, fn, params, inputs, out, note

    def run(self):
        run_linalg(self.backend, self.fn, self.params, self.inputs, self.out)

    def capture_refusal(self):
        if not self.backend.graphs:
            return f"the {self.backend.name} backend has no graphs"
        return (f"linalg.{self.fn} runs in CuPy's cuSOLVER wrappers, which take their workspace and read the "
                f"factorization's status on the host inside the call")

    def describe(self, source: bool = True) -> str:
        how = "LAPACK through NumPy" if self.backend.host_memory else "cuSOLVER through CuPy"
        params = ", ".join(f"{k}={v!r}" for k, v in zip(_PARAM_NAMES[self.fn], self.params))
        operands = ", ".join(str(tuple(a.shape)) for a in self.inputs)
        results = ", ".join(str(tuple(o.shape)) for o in self.out)
        text = (f"Linalg on {self.backend.name}: {self.fn}({operands}{', ' + params if params else ''}) -> {results} "
                f"{self.out[0].dtype}: {how}, one call over the whole stack; elementwise work on the results runs "
                f"in the next fused kernel")
        if self.note:
            text += f"\n  note: {self.note}"
        return text


_PARAM_NAMES = {"cholesky": ("upper",), "inv": (), "solve": ("vector",), "det": (), "slogdet": (),
                "eigh": ("UPLO",), "eigvalsh": ("UPLO",), "qr": ("mode",), "svd": ("full_matrices", "hermitian"),
                "svdvals": ("hermitian",), "eig": (), "eigvals": ()}


def build_linalg(node, backend, cut, out):
    """The call as a step writing every result of it; the node stands for its own result (written into
    the destination where the node is the plan's root). A node whose call already ran in this plan
    (another result of the same decomposition) takes its result from that step."""
    spec = node.attrs
    side = getattr(cut, "side", None)
    key = ("linalg", spec.fn, spec.params, tuple(id(a) for a in node.args))
    done = None if side is None else side.get(key)
    if done is not None:
        if out is None:
            return [], done[spec.index]
        # A root writer must fill the destination it was given (lt.evaluate(w, v): both are roots).
        return [copy_step(backend, done[spec.index].data, out, f"linalg.{spec.fn}: result {spec.index} of the call above")], \
            Tensor(out, node.device)
    steps: list = []
    inputs = [materialized(cut(a), backend, steps, cut) for a in node.args]
    # Each result of its own dtype: a complex call's eigenvalues and singular values are real.
    dtypes = spec.dtypes or (node.dtype,) * len(spec.shapes)
    results = [out if k == spec.index and out is not None else backend.empty(shape, dtype)
               for k, (shape, dtype) in enumerate(zip(spec.shapes, dtypes))]
    steps.append(LinalgStep(backend, spec.fn, spec.params, [t.data for t in inputs], results))
    tensors = [Tensor(r, node.device) for r in results]
    if side is not None:
        side[key] = tensors
    return steps, tensors[spec.index]
