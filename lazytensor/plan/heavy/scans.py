"""Planning a scan (cumsum, cumprod: lazytensor.ops.scans): one step, FusedScan, whose kernel
computes the elementwise expression feeding the scan as it goes, so `lt.cumsum(a * b + 1, axis=0)`
reads a and b and writes the result, with no temporary. A numba kernel on the CPU
(kernels/cpu/scan.py), a generated CUDA C kernel on CUDA (kernels/cuda/scan.py). The scan writes the
plan's destination when it is the plan's root, else a temporary that the work above reads."""
from __future__ import annotations

from lazytensor.core.tensor import Tensor
from lazytensor.kernels.program import describe
from lazytensor.plan.lower import lower
from lazytensor.core.memory import may_overlap
from lazytensor.plan.elementwise import copy_step
from lazytensor.plan.steps import Step


def _runner(backend):
    """The kernels' module for this backend, imported on first use (numba, CuPy stay unimported)."""
    if not backend.cuda_kernels:
        from lazytensor.kernels.cpu import scan as module
    else:
        from lazytensor.kernels.cuda import scan as module
    return module


class FusedScan(Step):
    """One generated kernel: the program over the scan's shape, scanned along the axis into `out`."""
    __slots__ = ("backend", "program", "spec", "out", "inputs", "scalars", "note")

    def __init__(self, backend, program, spec, out, inputs, scalars, note=""):
        self.backend, self.program, self.spec, self.out = backend, program, spec, out
        self.inputs, self.scalars, self.note = inputs, scalars, note

    def run(self):
        _runner(self.backend).run_scan(self.backend, self.program, self.spec, self.out, self.inputs, self.scalars)

    def capture_refusal(self):
        if not self.backend.graphs:
            return f"the {self.backend.name} backend has no graphs"
        if _runner(self.backend).library_fallback(self.spec):
            return "the scan runs in CuPy's library, over a temporary it takes on every call"
        return None

    def describe(self, source: bool = True) -> str:
        s = self.spec
        if self.backend.cuda_kernels and _runner(self.backend).library_fallback(s):
            how = ("in CuPy's parallel order; the elementwise expression evaluated into a temporary first (few long "
                   "rows: see below)")
        else:
            how = "in order (NumPy's roundings); the elementwise expression computed inside the scan's kernel"
        head = (f"FusedScan on {self.backend.name}: {s.kind} along axis {s.axis} of {s.shape}, accumulating in "
                f"{s.out_dtype.name} {how}; {self.program.n_inputs} array inputs")
        if self.note:
            head += f"\n  note: {self.note}"
        text = head + "\n" + "\n".join("    " + line for line in describe(self.program).splitlines())
        if source:
            explained = _runner(self.backend).explain_scan(self.backend, self.program, s, self.out, self.inputs)
            text += "\n" + "\n".join("    " + line for line in explained.splitlines())
        return text


def build_scan(node, backend, cut, out):
    x = cut(node.args[0])
    spec = node.attrs
    program, inputs, scalars = lower(x, spec.out_dtype)
    # The scan writes element k after reading only elements <= k along the axis, but a destination
    # that an input overlaps through another index map would be read after it was written.
    target = out
    if out is None or any(may_overlap(a, out) and a is not out for a in inputs):
        target = backend.empty(spec.shape, spec.out_dtype)
    steps = [FusedScan(backend, program, spec, target, inputs, scalars)]
    if out is not None and target is not out:
        steps[0].note = "an input overlaps the destination through another index map: scanned into a temporary"
        steps.append(copy_step(backend, target, out, "copy the scan's temporary into the destination"))
    return steps, Tensor(target, node.device)

