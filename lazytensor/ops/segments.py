"""Segmented sums: per-segment sums of flat arrays in ONE pass (a parameter region's per-tensor norms,
lazytensor.nn.regions), and the per-segment values spread back over the segments.

segment_sums([e0, e1, ...], segments) is a heavy node of shape (k, len(segments.sizes)): row j holds
the sums of e_j over each segment, every e_j an elementwise expression over the flat array computed
in the same pass (its kernel: kernels/cpu/render_numba_segments.py). Each segment is summed in the
order the full sum of a 1-D array of its size takes, so a segment's sum has the bits of
lt.sum over that segment alone, in both tiers. segment_broadcast(v, segments) is the flat array whose
segment s holds v[s] everywhere and whose gaps between segments hold 0.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.expr import Expr
from lazytensor.core import tensor as _tensor
from lazytensor.kernels.program import Segments
from lazytensor.ops.reductions import _accumulator, _result_dtype

_interned: dict = {}


def segments_of(starts, sizes, length: int) -> Segments:
    """The Segments object of these bounds (one per layout: kernels and plans key on it)."""
    seg = Segments(tuple(int(s) for s in starts), tuple(int(n) for n in sizes), int(length))
    if len(seg.starts) != len(seg.sizes) or not seg.sizes:
        raise ValueError("segments: one start per size, at least one segment")
    end = 0
    for start, n in zip(seg.starts, seg.sizes):
        if start < end or n < 1:
            raise ValueError(f"segments must be non-empty, in order and not overlap; got starts {seg.starts}, "
                             f"sizes {seg.sizes}")
        end = start + n
    if end > seg.length:
        raise ValueError(f"segments end at {end}, past the array's {seg.length} elements")
    return _interned.setdefault(seg, seg)


def segment_sums(operands, segments: Segments) -> Expr:
    """(k, segments) sums: row j the per-segment sums of operands[j] (1-D, segments.length long)."""
    operands = [_tensor.as_node(x) for x in operands]
    dtypes = {x.dtype for x in operands}
    if not operands or len(dtypes) != 1:
        raise ValueError(f"segment_sums: one dtype for every operand; got {sorted(d.name for d in dtypes)}")
    (dtype,) = dtypes
    if dtype.kind != "f":
        raise TypeError(f"segment_sums sums floating-point values; got {dtype.name}")
    for x in operands:
        if tuple(x.shape) != (segments.length,):
            raise ValueError(f"segment_sums: operands of shape ({segments.length},); got {tuple(x.shape)}")
    out = _result_dtype("sum", dtype, None)
    return Expr("segment_sums", tuple(operands), (len(operands), len(segments.sizes)), out, operands[0].device,
                heavy=True, attrs=(segments, _accumulator("sum", dtype, out)))


def segment_broadcast(values, segments: Segments) -> Expr:
    """The flat array (segments.length,) with values[s] over segment s and 0 between segments."""
    values = _tensor.as_node(values)
    if tuple(values.shape) != (len(segments.sizes),):
        raise ValueError(f"segment_broadcast: one value per segment, ({len(segments.sizes)},); got "
                         f"{tuple(values.shape)}")
    return Expr("segment_broadcast", (values,), (segments.length,), np.dtype(values.dtype), values.device,
                heavy=True, attrs=segments)
