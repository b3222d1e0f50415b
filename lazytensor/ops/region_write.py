"""region_write: parts written into their segments of one flat tensor, lazily (the gradients of a
parameter region, lazytensor.nn.regions). A heavy node whose value is the region's memory after the
writes; its plan (lazytensor.plan.heavy.region_write) has each part's own step write its segment
(a weight gradient's convolution or matmul writes it directly), the bytes between segments untouched.
The segments are Tensors over the region's memory, each of its part's shape, kept by the caller: a
plan recipe rebinds the arrays of the tensors an expression reads, never a view made while planning."""
from __future__ import annotations

from lazytensor.core.expr import Expr
from lazytensor.core.memory import owner
from lazytensor.core.tensor import Tensor


def region_write(region: Tensor, segments, parts) -> Expr:
    """`region` (1-D) with each part written into its segment (a Tensor over region's memory)."""
    segments, parts = tuple(segments), tuple(parts)
    if region.ndim != 1 or len(parts) != len(segments):
        raise ValueError("region_write: a 1-D region and one segment per part")
    for s, p in zip(segments, parts):
        if (tuple(s.shape) != tuple(p.shape) or s.dtype != region.dtype or p.device != region.device
                or owner(s.data) is not owner(region.data)):
            raise ValueError(f"region_write: a part {tuple(p.shape)} on {p.device} needs a segment of its shape in "
                             f"the region's memory; got {tuple(s.shape)} {s.dtype}")
    return Expr("region_write", (region, *segments, *parts), region.shape, region.dtype, region.device, heavy=True,
                attrs=len(parts))
