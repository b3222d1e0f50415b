"""Planning region_write (lazytensor.ops.region_write): every part written into its segment of the
region by the step that computes it where that step can write a given array (a weight gradient's
convolution or matmul: cut.into; a bias gradient by its weight gradient's GEMM epilogue); the other
parts, grouped by shape, one kernel per shape writing all the segments of that shape (a network's
BatchNorm gradients: a few kernels, not two per layer). The region's memory outside the segments is
never written. The node's value is the region itself."""
from __future__ import annotations

from lazytensor.core.expr import astype
from lazytensor.core.tensor import Tensor
from lazytensor.plan.lower import lower_many
from lazytensor.plan.multi_output_step import MultiOutputElementwise


def build_region_write(node, backend, cut, out):
    n = node.attrs
    region, segments, parts = node.args[0], node.args[1:1 + n], node.args[1 + n:]
    written = getattr(cut, "written_into", None)
    if written is None:
        written = cut.written_into = {}
    for part, segment in zip(parts, segments):     # where a weight gradient's GEMM sums a bias gradient
        written[id(part)] = segment.data
    by_shape: dict = {}             # shape -> [(part index, the part's expression, its segment)]
    for i, (part, segment) in enumerate(zip(parts, segments)):
        if cut.into(part, segment.data):
            cut.steps[-1].note = f"writes part {i} of {n} into its segment of the region"
            continue
        done = cut.memo.get(id(part))
        if type(done) is Tensor and done.data is segment.data:
            continue                # written by another part's step (a bias gradient by its GEMM's epilogue)
        by_shape.setdefault(tuple(part.shape), []).append((i, astype(cut(part), node.dtype), segment.data))
    for part in parts:
        written.pop(id(part), None)
    steps = []
    for shape, members in by_shape.items():
        program, inputs, scalars = lower_many([e for _, e, _ in members], [node.dtype] * len(members))
        labels = [f"part {i} of the region" for i, _, _ in members]
        steps.append(MultiOutputElementwise(backend, program, [s for _, _, s in members], inputs, scalars, labels,
                                            f"{len(members)} parts of shape {shape} into their segments"))
    return steps, region
