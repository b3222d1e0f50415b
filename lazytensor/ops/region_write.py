"""region_write: parts written into their segments of one flat tensor, lazily (the gradients of a
parameter region, lazytensor.nn.regions). A heavy node whose value is the region's memory after the
writes; its plan (lazytensor.plan.heavy.region_write) has each part's own step write its segment
(a weight gradient's convolution or matmul writes it directly), the bytes between segments untouched."""
from __future__ import annotations

from lazytensor.core.expr import Expr
from lazytensor.core.tensor import Tensor


def region_write(region: Tensor, parts, starts) -> Expr:
    """`region` (1-D) with part i written, flattened, at elements [starts[i], starts[i] + parts[i].size)."""
    parts, starts = tuple(parts), tuple(int(s) for s in starts)
    if region.ndim != 1 or len(parts) != len(starts):
        raise ValueError("region_write: a 1-D region and one start per part")
    for p, s in zip(parts, starts):
        if p.device != region.device or s < 0 or s + p.size > region.size:
            raise ValueError(f"region_write: a part of {p.size} elements on {p.device} at {s} does not fit the "
                             f"region of {region.size} on {region.device}")
    return Expr("region_write", (region, *parts), region.shape, region.dtype, region.device, heavy=True,
                attrs=starts)
