"""Planning region_write (lazytensor.ops.region_write): every part written into its segment of the
region by the step that computes it where that step can write a given array (a weight gradient's
convolution or matmul: cut.into); the other parts, grouped by shape, one kernel per shape writing
all the segments of that shape (a network's BatchNorm gradients: a few kernels, not two per layer).
The region's memory outside the segments is never written. The node's value is the region itself."""
from __future__ import annotations

from lazytensor.core.expr import astype
from lazytensor.plan.lower import lower_many
from lazytensor.plan.multi_output_step import MultiOutputElementwise


def build_region_write(node, backend, cut, out):
    region, parts = node.args[0], node.args[1:]
    data = region.data
    by_shape: dict = {}             # shape -> [(part index, the part's expression, its segment)]
    for i, (part, start) in enumerate(zip(parts, node.attrs)):
        segment = data[start:start + part.size].reshape(part.shape)
        if cut.into(part, segment):
            cut.steps[-1].note = f"writes part {i} of {len(parts)} into its segment of the region"
            continue
        by_shape.setdefault(tuple(part.shape), []).append((i, astype(cut(part), node.dtype), segment))
    steps = []
    for shape, members in by_shape.items():
        program, inputs, scalars = lower_many([e for _, e, _ in members], [node.dtype] * len(members))
        labels = [f"part {i} of the region" for i, _, _ in members]
        steps.append(MultiOutputElementwise(backend, program, [s for _, _, s in members], inputs, scalars, labels,
                                            f"{len(members)} parts of shape {shape} into their segments"))
    return steps, region
