"""Planning `a[mask]` (a "mask_gather" node, lazytensor.ops.masked): `a` is evaluated where it is an
expression, then the device's array library compresses it (NumPy's or CuPy's boolean indexing)
into the result. A step of its own: its result's size is the mask's count, no elementwise shape."""
from __future__ import annotations

from lazytensor.core.tensor import Tensor
from lazytensor.kernels import launch_log
from lazytensor.core.memory import may_overlap
from lazytensor.plan.elementwise import copy_step
from lazytensor.plan.evaluated import materialized
from lazytensor.plan.steps import Step


class MaskGather(Step):
    """out[...] = x[mask], by the device's array library."""
    __slots__ = ("backend", "x", "mask", "out")

    def __init__(self, backend, x, mask, out):
        self.backend, self.x, self.mask, self.out = backend, x, mask, out

    def run(self):
        if self.out.size:
            self.out[...] = self.x[self.mask]
        if launch_log.listeners:
            launch_log.record(launch_log.KernelRecord("mask_gather", self.backend.name, "gather", int(self.out.size),
                                                      "memory", 0.0, "array library"))

    def capture_refusal(self):
        return "a boolean-mask gather runs in the array library (CuPy may synchronize)"

    def describe(self, source: bool = True) -> str:
        library = "NumPy" if self.backend.host_memory else "CuPy"
        return (f"MaskGather on {self.backend.name}: x[mask] of {self.x.shape} {self.x.dtype} -> {self.out.shape}, "
                f"by {library}'s boolean indexing (the mask's count was read when the gather was built)")




class MaskExpand(Step):
    """out[...] = 0; out[mask] = g: the adjoint of a mask gather (its gradient), by the array library."""
    __slots__ = ("backend", "g", "mask", "out")

    def __init__(self, backend, g, mask, out):
        self.backend, self.g, self.mask, self.out = backend, g, mask, out

    def run(self):
        self.out[...] = 0
        self.out[self.mask] = self.g
        if launch_log.listeners:
            launch_log.record(launch_log.KernelRecord("mask_expand", self.backend.name, "scatter", int(self.out.size),
                                                      "memory", 0.0, "array library"))

    def capture_refusal(self):
        return "a boolean-mask scatter runs in the array library (CuPy may synchronize)"

    def describe(self, source: bool = True) -> str:
        library = "NumPy" if self.backend.host_memory else "CuPy"
        return (f"MaskExpand on {self.backend.name}: zeros of {self.out.shape} {self.out.dtype} with g "
                f"{self.g.shape} written where the mask is true, by {library}'s boolean indexing (the gradient "
                f"of a mask gather)")


def _mask_step_builder(step_type, overlap_note: str):
    """The planner's builder of a mask step (x, mask) -> out: it writes the destination unless that
    shares memory with what the step reads, else a temporary then a copy."""
    def build(node, backend, cut, out):
        steps: list = []
        x = materialized(cut(node.args[0]), backend, steps, cut, shared=False).data
        mask = node.args[1].data
        target = out
        if out is None or may_overlap(out, x) or may_overlap(out, mask):
            target = backend.empty(tuple(node.shape), node.dtype)
        steps.append(step_type(backend, x, mask, target))
        if out is not None and target is not out:
            steps.append(copy_step(backend, target, out, overlap_note))
        return steps, Tensor(target, node.device)
    return build


build_mask_gather = _mask_step_builder(
    MaskGather, "the gather's operand overlaps the destination: gathered into a temporary, copied here")
build_mask_expand = _mask_step_builder(
    MaskExpand, "the scatter's operand overlaps the destination: written into a temporary, copied here")
