"""A static memory plan: a plan's temporaries packed into ONE allocation by their lifetimes.

A plan made for one run allocates each temporary on its own (the pool hands the memory back when
the plan is dropped). A plan that runs again and again (a training step, lazytensor.plan.recorded)
keeps its temporaries, so their memory is planned once: a temporary lives from the first step that
touches it (its writer) to the last (its last reader), and two temporaries whose lifetimes do not
overlap may share bytes. Offsets come from greedy interval packing, largest first, each at the
lowest offset clear of the temporaries already placed that live at the same time (the classic
static allocator of inference engines); the arena is as large as the highest end. The steps are
then rebuilt over views of the arena (lazytensor.plan.recipes' StepTemplate), with the tensors the
expressions read and the destinations left as they are.

An array counts as a temporary when its allocation is none of the tensors' the expressions read
(through views too) nor a destination's: the planner made it. The result holders of the plan's
batch_norm nodes (BatchNormSaved) are released: their arrays were the planning's temporaries, and
what a backward outside the plan could read from them is not kept.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.expr import Const
from lazytensor.core.memory import address, extent, owner, owner_address
from lazytensor.core.tensor import Tensor
from lazytensor.plan.recipes import Source, StepTemplate

ALIGNMENT = 512         # bytes: every temporary starts on such a boundary (CuPy's pool rounds alike)


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


class MemoryPlan:
    """The steps of a plan rebuilt over one arena (`steps`, the planned ones, is emptied: their
    temporaries are freed before the arena is allocated). Attributes for lt.explain: `temporaries` (how
    many), `total` (their bytes, each aligned), `peak` (the most bytes live at once, and at which
    step), `arena` (the one allocation's bytes), `lifetimes` ([(bytes, first step, last step)])."""

    def __init__(self, steps, roots, outs, backend):
        external, holders = _external_owners(roots)
        external.update(id(owner(o)) for o in outs)
        spans: list = []                # per temporary allocation: [bytes, first step, last step]
        index: dict = {}                # id(owner) -> its position in spans
        numbers: dict = {}              # Source -> its index in the list of arrays the steps read
        keep: list = []                 # the planning's allocations, alive while the templates are made
        at = [0]

        def source(a):
            own = owner(a)
            if id(own) in external or a.size == 0:
                return a
            j = index.get(id(own))
            if j is None:
                j = index[id(own)] = len(spans)
                spans.append([0, at[0], at[0]])
                keep.append(own)
            base = owner_address(own)
            span = spans[j]
            span[0] = max(span[0], extent(a)[1] - base)
            span[2] = at[0]
            src = Source(("temp", j, address(a) - base, a.shape, a.dtype, a.strides))
            return Source((numbers.setdefault(src, len(numbers)),))

        templates = []
        for k, step in enumerate(steps):
            at[0] = k
            templates.append(StepTemplate(step, source))
        step = None                     # the loop held the last planned step
        self.lifetimes = [tuple(s) for s in spans]
        offsets, size = pack([(_aligned(b), first, last) for b, first, last in self.lifetimes])
        self.offsets = offsets
        self.arena = size
        self.temporaries = len(spans)
        self.total = sum(_aligned(b) for b, _, _ in self.lifetimes)
        self.peak, self.peak_step = _peak(self.lifetimes, len(templates))
        # The planning's own allocations go before the arena is taken, so that the device holds the
        # larger of the two, not both: the caller's list of steps is emptied (its steps held them),
        # the holders released, and the memory pool's free blocks given back.
        steps.clear()
        for holder in holders:
            holder.release()
        del keep
        free = getattr(backend, "free_cached_memory", None)
        if free is not None:
            free()
        arena = backend.empty((max(size, 1),), np.uint8)
        self.memory = arena
        arrays = [None] * len(numbers)
        for src, k in numbers.items():
            _, j, offset, shape, dtype, strides = src
            arrays[k] = backend.view(arena, offsets[j] + offset, shape, dtype, strides)
        self.steps = [t.compile()(arrays) for t in templates]

    def describe(self) -> str:
        mb = 2.0 ** 20
        saved = 1.0 - self.arena / self.total if self.total else 0.0
        return (f"memory: {self.temporaries} temporaries, {self.total / mb:.3f} MB if each had its own memory; "
                f"peak of live temporaries {self.peak / mb:.3f} MB (at step {self.peak_step + 1}); "
                f"arena {self.arena / mb:.3f} MB in one allocation ({saved:.0%} less than their sum), "
                f"offsets by lifetime: a temporary's memory is reused once its last reader has run")


def pack(intervals) -> tuple:
    """Offsets for [(bytes, first, last)] such that intervals alive at the same step (their
    [first, last] ranges meet) never share bytes: greedy, largest first, each at the lowest offset
    that fits. -> (offsets, arena bytes)."""
    placed: list = []           # (offset, end, first, last)
    offsets = [0] * len(intervals)
    for j in sorted(range(len(intervals)), key=lambda j: (-intervals[j][0], intervals[j][1])):
        size, first, last = intervals[j]
        busy = sorted((o, e) for o, e, f, l in placed if f <= last and first <= l)
        offset = 0
        for o, e in busy:
            if offset + size <= o:
                break
            offset = max(offset, e)
        offsets[j] = offset
        placed.append((offset, offset + size, first, last))
    return offsets, max((e for _, e, _, _ in placed), default=0)


def _peak(lifetimes, n_steps) -> tuple:
    """(the most bytes of temporaries alive at one step, that step)."""
    live = [0] * max(n_steps, 1)
    for size, first, last in lifetimes:
        for k in range(first, last + 1):
            live[k] += _aligned(size)
    k = max(range(len(live)), key=live.__getitem__)
    return live[k], k


def _external_owners(roots) -> tuple:
    """({id(owner)} of every tensor the expressions read, views' bases included; the result holders
    of their nodes)."""
    owners: set = set()
    holders: dict = {}
    seen: set = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in seen or isinstance(node, Const):
            continue
        seen.add(id(node))
        if isinstance(node, Tensor):
            owners.add(id(owner(node.data)))
            if node.view_of is not None:
                stack.append(node.view_of[0])
            continue
        result = getattr(node, "result", None)
        if result is not None:             # an evaluated node reads its result
            stack.append(result)
        holder = getattr(getattr(node, "attrs", None), "saved", None)
        if holder is not None:
            holders[id(holder)] = holder
        stack.extend(node.args)
    return owners, list(holders.values())
