"""A static memory plan: a plan's temporaries packed into ONE allocation by their lifetimes.

Design: docs/design/training-step.md, section "lazytensor/step/memory_plan.py".
"""
from __future__ import annotations

import itertools

import numpy as np

from lazytensor.core.expr import Const
from lazytensor.core.memory import address, extent, owner, owner_address
from lazytensor.core.tensor import Tensor
from lazytensor.reuse.recipes import Source, StepTemplate
from lazytensor.step.segments import keys as segment_keys
from lazytensor.step.step_order import memory_order
from lazytensor.plan.steps import FusedElementwise

ALIGNMENT = 512         # bytes: every temporary starts on such a boundary (CuPy's pool rounds alike)


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


class MemoryPlan:
    """The steps of a plan rebuilt over one arena (`steps`, the planned ones, is emptied: their
    temporaries are freed before the arena is allocated). Attributes for lt.explain: `temporaries` (how
    many), `total` (their bytes, each aligned), `peak` (the most bytes live at once, and at which
    step), `arena` (the one allocation's bytes), `lifetimes` ([(bytes, first step, last step)])."""

    def __init__(self, steps, roots, outs, backend, space=None):
        external, holders = _external_owners(roots)
        external.update((id(owner(o)), owner(o)) for o in outs)
        if space is not None and any(space.holds(own) for own in external.values()):
            raise RuntimeError("a recorded plan evaluated an expression while it was planned: its result would "
                               "live in placeholder memory (lazytensor.plan.planning_space)")
        spans: list = []                # per temporary allocation: [bytes, first step, last step]
        index: dict = {}                # id(owner) -> its position in spans
        numbers: dict = {}              # Source -> its index in the list of arrays the steps read
        keep: list = []                 # the planning's allocations, alive while the templates are made
        touches: list = []              # per step: the ids of the allocations it reads or writes
        at = [0]

        def source(a):
            own = owner(a)
            if a.size == 0:
                return a
            touches[at[0]].update(segment_keys(a))
            if id(own) in external:
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
        elementwise = []                # (step number, its output, its inputs): those that may write in place
        kinds, fixed, overwrites, written = [], [], [], []
        destinations = {id(owner(o)) for o in outs}
        for k, step in enumerate(steps):
            at[0] = k
            touches.append(set())
            for name in getattr(step, "marks_only", ()):
                setattr(step, name, ())     # the holders are released below: nothing reads the marks
            templates.append(StepTemplate(step, source))
            kinds.append(type(step).__name__)
            fixed.append(getattr(step, "commits", False) or _writes(step, destinations))
            overwrites.append(bool(getattr(step, "dx_in_x", False)))
            written.append(_written(step))
            if type(step) is FusedElementwise:
                elementwise.append((k, step.out, step.inputs))
        step = None                     # the loop held the last planned step
        # The memory the steps read and write outside the arena: id(allocation) -> bytes.
        self.external = {k: _nbytes(own) for k, own in external.items()}
        external = None
        # The steps in an order that frees memory sooner (lazytensor.step.step_order); lifetimes by it.
        # Kept only where it lowers the peak of live temporaries (a plan whose wgrads already run beside
        # their dgrads gains nothing, and moving other steps may raise it).
        order, up, down = memory_order(touches, {id(own): tuple(span) for own, span in zip(keep, spans)}, fixed,
                                       overwrites, written)
        planned = [list(span) for span in spans]
        position = _reordered(spans, keep, touches, order)
        if _peak(spans, len(order))[0] >= _peak(planned, len(order))[0]:
            spans[:] = planned
            order = position = list(range(len(order)))
            up = down = 0
        self.moved, self.sunk = up, down
        touches = planned = None
        templates = [templates[k] for k in order]
        elementwise = [(position[k], out, inputs) for k, out, inputs in elementwise]
        self.kinds = [kinds[order[span[1]]] for span in spans]     # per temporary: the class of its writer
        self.lifetimes = [tuple(s) for s in spans]
        # A temporary written in place of another shares its bytes: one interval per chain of them.
        self.in_place = _in_place(elementwise, index, spans)
        del elementwise
        chains = _chains(self.in_place, len(spans))
        intervals = [(max(_aligned(spans[j][0]) for j in chain), spans[chain[0]][1], max(spans[j][2] for j in chain))
                     for chain in chains]
        placed, size = pack(intervals)
        offsets = [0] * len(spans)
        for chain, offset in zip(chains, placed):
            for j in chain:
                offsets[j] = offset
        self.offsets = offsets
        self.arena = size
        self.temporaries = len(spans)
        self.total = sum(_aligned(b) for b, _, _ in self.lifetimes)
        self.peak, self.peak_step = _peak(intervals, len(templates))
        # The planning's own allocations go before the arena is taken, so that the device holds the
        # larger of the two, not both: the caller's list of steps is emptied (its steps held them),
        # the holders released, and the memory pool's free blocks given back.
        steps.clear()
        for holder in holders:
            holder.release()
        keep = None
        backend.free_cached_memory()
        arena = backend.empty((max(size, 1),), np.uint8)
        self.memory = arena
        arrays = [None] * len(numbers)
        for src, k in numbers.items():
            _, j, offset, shape, dtype, strides = src
            arrays[k] = backend.view(arena, offsets[j] + offset, shape, dtype, strides)
        self.steps = [t.compile()(arrays) for t in templates]

    def live_at_peak(self) -> list:
        """[(kind of the writing step, bytes, temporaries)] alive at the peak step, most bytes first."""
        kinds: dict = {}
        for (size, first, last), kind in zip(self.lifetimes, self.kinds):
            if first <= self.peak_step <= last:
                n = kinds.setdefault(kind, [0, 0])
                n[0] += _aligned(size)
                n[1] += 1
        return sorted(((k, b, c) for k, (b, c) in kinds.items()), key=lambda t: -t[1])

    def describe(self) -> str:
        mb = 2.0 ** 20
        saved = 1.0 - self.arena / self.total if self.total else 0.0
        return (f"memory: {self.temporaries} temporaries, {self.total / mb:.3f} MB if each had its own memory; "
                f"peak of live temporaries {self.peak / mb:.3f} MB (at step {self.peak_step + 1}); "
                f"arena {self.arena / mb:.3f} MB in one allocation ({saved:.0%} less than their sum), "
                f"offsets by lifetime: a temporary's memory is reused once its last reader has run; "
                f"{len(self.in_place)} written in place of an input that dies at that step; {self.moved} steps "
                f"moved up to right after the last step they conflict with, as they free more than they "
                f"allocate (a wgrad and the kernels making its inputs, after its dgrad), {self.sunk} moved down "
                f"to right before the first step they conflict with, as they allocate more than they free (a "
                f"weight gradient that only the update reads); kept where the peak falls")


def pack(intervals) -> tuple:
    """Offsets for [(bytes, first, last)] such that intervals alive at the same step (their
    [first, last] ranges meet) never share bytes -> (offsets, arena bytes): the smallest arena of a
    few greedy packings, as no one of them wins on every network (largest first leaves holes that a
    chronological order fills, and the other way round). Each places the intervals in its order,
    each in the gap between those already placed that live at the same time: the lowest gap where
    it fits (first fit) or the smallest (best fit), else above them all."""
    best = None
    for order in _ORDERS:
        ranked = sorted(range(len(intervals)), key=lambda j: order(intervals[j]))
        for best_fit in (False, True):
            placed = _packed(intervals, ranked, best_fit)
            if best is None or placed[1] < best[1]:
                best = placed
    return best if best is not None else ([], 0)


_ORDERS = (lambda t: (-t[0], t[1]),                         # largest first
           lambda t: (-t[0], -t[2]),                        # largest first, the longest-lived of a size first
           lambda t: (-t[0] * (t[2] - t[1] + 1), t[1]),     # most bytes x steps first
           lambda t: (t[1], -t[0]))                         # in the order the steps allocate


def _packed(intervals, order, best_fit: bool) -> tuple:
    placed: list = []           # (offset, end, first, last)
    offsets = [0] * len(intervals)
    for j in order:
        size, first, last = intervals[j]
        busy = sorted((o, e) for o, e, f, l in placed if f <= last and first <= l)
        offset, gap, top = None, None, 0
        for o, e in busy:
            if o - top >= size and (gap is None or o - top < gap):
                offset, gap = top, o - top
                if not best_fit:
                    break
            top = max(top, e)
        offsets[j] = top if offset is None else offset
        placed.append((offsets[j], offsets[j] + size, first, last))
    return offsets, max((e for _, e, _, _ in placed), default=0)


def _peak(lifetimes, n_steps) -> tuple:
    """(the most bytes of temporaries alive at one step, that step)."""
    change = [0] * (max(n_steps, 1) + 1)        # bytes born at each step, less those that died before it
    for size, first, last in lifetimes:
        change[first] += _aligned(size)
        change[last + 1] -= _aligned(size)
    live = list(itertools.accumulate(change[:-1]))
    k = max(range(len(live)), key=live.__getitem__)
    return live[k], k


def _in_place(elementwise, index, spans) -> dict:
    """{temporary: the temporary whose bytes it takes}: a one-output elementwise step writes its
    result over an input that dies at that step, where the kernel reads that input at the same
    element it writes (same shape, strides and item size: the store depends on the load, as for
    `a[...] = a + 1`), each the whole of its allocation, and no other operand is a view of it."""
    taken: dict = {}
    given: set = set()
    for k, out, inputs in elementwise:
        jo = index.get(id(owner(out)))
        if jo is None or spans[jo][1] != k or not _whole(out, spans[jo][0]):
            continue
        for a in inputs:
            ji = index.get(id(owner(a)))
            if (ji is None or ji == jo or ji in given or spans[ji][2] != k or a.shape != out.shape or a.strides != out.strides
                    or a.itemsize != out.itemsize or not _whole(a, spans[ji][0])
                    or any(owner(b) is owner(a) and b is not a for b in inputs)):
                continue
            taken[jo] = ji
            given.add(ji)
            break
    return taken


def _reordered(spans, keep, touches, order) -> list:
    """Each temporary's first and last step (in spans) by the steps' new order -> each step's position."""
    position = [0] * len(order)
    for i, k in enumerate(order):
        position[k] = i
    temps = {id(own): j for j, own in enumerate(keep)}
    for span in spans:
        span[1], span[2] = len(order), -1
    for k, owners in enumerate(touches):
        for o in owners:
            j = temps.get(o)
            if j is not None:
                span = spans[j]
                span[1], span[2] = min(span[1], position[k]), max(span[2], position[k])
    return position


def _writes(step, destinations) -> bool:
    """Whether the step, or a step nested in it, writes one of the destinations (its `out` or `outs`)."""
    written = [getattr(step, "out", None), *(getattr(step, "outs", None) or ())]
    if any(hasattr(a, "shape") and id(owner(a)) in destinations for a in written):
        return True
    nested = [getattr(step, name, None) for name in getattr(type(step), "__slots__", ())]
    nested += [s for v in nested if type(v) is list for s in v]
    return any(hasattr(v, "run") and hasattr(type(v), "__slots__") and _writes(v, destinations) for v in nested)


def _written(step):
    """The ids of the allocations `step` (or a step nested in it) writes, by its `writes` slots; None
    for a step that does not say (every allocation it touches counts as written)."""
    names = getattr(type(step), "writes", None)
    if names is None:
        return None
    out: set = set()
    for name in getattr(type(step), "__slots__", ()):
        v = getattr(step, name, None)
        for x in (v if type(v) in (list, tuple) else (v,)):
            if hasattr(x, "run") and hasattr(type(x), "__slots__"):
                nested = _written(x)
                if nested is None:
                    return None
                out |= nested
            elif name in names and hasattr(x, "shape"):
                out.update(segment_keys(x))
    return out


def _whole(a, nbytes: int) -> bool:
    return a.flags.c_contiguous and a.nbytes == nbytes and address(a) == owner_address(owner(a))


def _chains(taken: dict, n: int) -> list:
    """The temporaries grouped by the memory they share: each chain in the order its members live."""
    successor = {ji: jo for jo, ji in taken.items()}
    chains = []
    for j in range(n):
        if j in taken:
            continue                    # not the first of its chain
        chain = [j]
        while chain[-1] in successor:
            chain.append(successor[chain[-1]])
        chains.append(chain)
    return chains


def _nbytes(own) -> int:
    """The bytes of an allocation (owner()): a NumPy array's, or a CuPy memory's size."""
    n = getattr(own, "nbytes", None)
    return int(n if n is not None else getattr(own, "size", 0))


def _external_owners(roots) -> tuple:
    """({id(owner): owner} of every tensor the expressions read, views' bases included; the result
    holders of their nodes)."""
    owners: dict = {}
    holders: dict = {}
    seen: set = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in seen or isinstance(node, Const):
            continue
        seen.add(id(node))
        if isinstance(node, Tensor):
            own = owner(node.data)
            owners[id(own)] = own
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
