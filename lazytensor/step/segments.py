"""Allocations split into segments for a recorded step's order: the parameter regions
(lazytensor.nn.regions) hold every gradient in one buffer, each written by its own step, so that the
order of steps (lazytensor.step.step_order) counts a step as touching only the segments it reaches;
else every weight gradient would conflict with every other one (one allocation, each writing it)
and none could move up beside its dgrad.
"""
from __future__ import annotations

import bisect
import weakref

from lazytensor.core.memory import extent, owner, owner_address

# id(owner) -> (owner's address, the segments' starts in bytes from it, ascending, the first 0)
_split: dict = {}


def split(tensor, starts) -> None:
    """Count the allocation of `tensor` (which owns it, from its first byte) as segments starting at
    byte offsets `starts`, while the Tensor lives. (A stale entry would still be sound: steps whose
    bytes do not overlap never conflict; the segments only say which bytes a step reaches.)"""
    own = owner(tensor.data)
    key = id(own)
    _split[key] = (owner_address(own), tuple(sorted({0, *starts})))
    weakref.finalize(tensor, _split.pop, key, None)


def keys(a) -> list:
    """What step order counts array `a` as touching: its allocation's id, or (id, segment) for each
    segment of a split allocation that a reaches."""
    own = owner(a)
    key = id(own)
    entry = _split.get(key)
    if entry is None:
        return [key]
    base, starts = entry
    if owner_address(own) != base:      # an id reused by another allocation
        return [key]
    lo, hi = extent(a)
    first = bisect.bisect_right(starts, lo - base) - 1
    last = bisect.bisect_right(starts, hi - 1 - base) - 1
    return [(key, i) for i in range(max(first, 0), last + 1)]
