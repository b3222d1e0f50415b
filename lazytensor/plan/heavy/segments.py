"""Planning segmented sums and their spreading (lazytensor.ops.segments): one step each. The
operands' elementwise programs are lowered into the segmented sum's one pass; an operand reading
an array that is neither the flat array's length and C-contiguous nor a single element is
evaluated into a temporary first."""
from __future__ import annotations

from lazytensor.core.tensor import Tensor
from lazytensor.plan.elementwise import copy_step
from lazytensor.plan.evaluated import materialized
from lazytensor.plan.lower import lower_many
from lazytensor.plan.segment_steps import SegmentBroadcast, SegmentSums


def _readable(a, length: int) -> bool:
    return a.size == 1 or (a.size == length and a.flags.c_contiguous)


def build_segment_sums(node, backend, cut, out):
    if not backend.segmented_sums:
        raise NotImplementedError(f"segment_sums: the {backend.name} backend has no segmented sums yet")
    segments, acc = node.attrs
    operands = [cut(a) for a in node.args]
    program, inputs, scalars = lower_many(operands, [a.dtype for a in operands])
    steps = []
    if not all(_readable(a, segments.length) for a in inputs):
        operands = [materialized(o, backend, steps, cut) for o in operands]
        program, inputs, scalars = lower_many(operands, [a.dtype for a in operands])
    direct = out is not None and out.flags.c_contiguous
    target = out if direct else backend.empty(tuple(node.shape), node.dtype)
    steps.append(SegmentSums(backend, program, segments, acc, target, inputs, scalars))
    if out is not None and not direct:
        steps.append(copy_step(backend, target, out, "a strided destination: summed into a temporary, copied here"))
    return steps, Tensor(target, node.device)


def build_segment_broadcast(node, backend, cut, out):
    if not backend.host_memory:
        raise NotImplementedError(f"segment_broadcast: the {backend.name} backend has no segment spreading yet")
    steps = []
    values = materialized(cut(node.args[0]), backend, steps, cut)
    target = out if out is not None and out.flags.c_contiguous else backend.empty(tuple(node.shape), node.dtype)
    steps.append(SegmentBroadcast(backend, node.attrs, values.data, target))
    if out is not None and target is not out:
        steps.append(copy_step(backend, target, out, "a strided destination: spread into a temporary, copied here"))
    return steps, Tensor(target, node.device)
