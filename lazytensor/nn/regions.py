"""Parameters in contiguous regions: one flat buffer per (dtype, device), each parameter a view of
its own segment, so that an optimizer updates ALL the parameters of a region with one elementwise
kernel whatever their shapes (SGD, AdamW; the AMP found_inf check is one reduction per region; the
per-parameter norms of LARS and LAMB are one segmented sum per region, lazytensor.ops.segments).

A Region re-points each parameter Tensor at its segment (the same Tensor objects: a model's
parameters() still returns them, with their values), and makes flat tensors of the same layout for
what goes with them element for element: the optimizer's state, the float32 master weights, the
gradients. Segments start on 256-byte boundaries of the parameters' dtype (cuBLAS and cuDNN read
aligned weights and write aligned weight gradients); the bytes between segments are zero in every
tensor of the region and stay zero (an update of zeros gives zeros), so a reduction over a whole
region (found_inf, a gradient norm) reads them harmlessly.

Gradients reach their region by region_write (lazytensor.ops.region_write): the step computing a
weight gradient writes its segment of the gradient region directly, which is persistent memory
kept with the region, its segments written every step and nothing else.

Design: docs/design/training-step.md, section "lazytensor/nn/regions.py".
"""
from __future__ import annotations

import weakref

import numpy as np

from lazytensor.core.readers import memory_of
from lazytensor.core.tensor import Tensor, zeros
from lazytensor.ops.region_write import region_write
from lazytensor.ops.segments import segments_of
from lazytensor.step.segments import split

ALIGNMENT = 256             # bytes, of the parameters' dtype


class Region:
    """Parameters of one dtype and device in one flat Tensor `flat`; `starts[i]` is the first
    element of parameter i's segment."""

    def __init__(self, params):
        self.params = list(params)
        self.dtype, self.device = self.params[0].dtype, self.params[0].device
        step = max(1, ALIGNMENT // self.dtype.itemsize)
        self.starts, at = [], 0
        for p in self.params:
            self.starts.append(at)
            at += -(-p.size // step) * step
        self.size = max(at, 1)
        self.flat = self.like(self.dtype)
        for p, start in zip(self.params, self.starts):
            segment = self._segment(self.flat, start, p)
            segment[...] = p.data
            _repoint(p, segment)
        # the parameters' segments of the flat layout, for per-parameter quantities in one pass (LARS, LAMB norms)
        self.segments = segments_of(self.starts, [p.size for p in self.params], self.size)
        self._gradients: dict = {}      # dtype -> (the persistent flat Tensor the gradients are written into, its segments)

    def like(self, dtype) -> Tensor:
        """A flat zero Tensor of this region's layout in `dtype` (state, master weights, gradients)."""
        t = zeros((self.size,), dtype, self.device)
        split(t, [s * t.dtype.itemsize for s in self.starts])
        return t

    def views(self, flat) -> list:
        """Each parameter's segment of the flat Tensor `flat`, shaped as the parameter."""
        return [Tensor(self._segment(flat, s, p), self.device) for p, s in zip(self.params, self.starts)]

    def gathered(self, grads):
        """The gradients (one per parameter, in order) as one flat expression of this layout: a
        region_write into the persistent gradient region of their dtype."""
        dtype = np.result_type(*(g.dtype for g in grads))
        kept = self._gradients.get(dtype)
        if kept is None:
            flat = self.like(dtype)
            kept = self._gradients[dtype] = (flat, self.views(flat))
        return region_write(kept[0], kept[1], grads)

    def gradient_buffers(self) -> list:
        return [flat for flat, _ in self._gradients.values()]

    @staticmethod
    def _segment(flat, start, p):
        return flat.data[start:start + p.size].reshape(p.shape)


# id(parameter) -> the live Region it is in (a parameter moves once: a second optimizer over the same
# parameters shares their regions, and one over others leaves them where they are)
_placed = weakref.WeakValueDictionary()


def regions(params) -> list | None:
    """The parameters in regions, one per (dtype, device) in order of first appearance, each
    parameter re-pointed at its segment; None (nothing changed) where some parameter cannot move:
    a view of another tensor, a parameter listed twice, not C-contiguous, or in a live region
    already unless the groups are exactly such regions (then those are shared)."""
    seen = set()
    for p in params:
        if id(p) in seen or p.view_of is not None or not p.data.flags.c_contiguous or p.size == 0:
            return None
        seen.add(id(p))
    groups: dict = {}
    for i, p in enumerate(params):
        groups.setdefault((p.dtype, p.device), []).append(i)
    placed = [_region_of(p) for p in params]
    if any(r is not None for r in placed):
        shared = [(idx, placed[idx[0]]) for idx in groups.values()]
        exact = all(r is not None and len(r.params) == len(idx) and all(q is params[i] for q, i in zip(r.params, idx))
                    for idx, r in shared)
        return shared if exact else None
    out = [(idx, Region([params[i] for i in idx])) for idx in groups.values()]
    for _, region in out:
        for p in region.params:
            _placed[id(p)] = region
    return out


def _region_of(p):
    region = _placed.get(id(p))
    return region if region is not None and any(q is p for q in region.params) else None


def _repoint(t: Tensor, data) -> None:
    """Tensor `t` over `data` (the same values) from now on; the expressions reading its old memory
    move to the new memory's record of readers, so that a write of the region settles them first."""
    old = t.memory
    t.data = data
    t.layout = t.flat = t.memory = None
    if old is not None:
        new = memory_of(t)
        new.extend(r for r in old if r() is not None)
