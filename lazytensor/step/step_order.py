"""The order a recorded plan's steps run in, chosen for memory: steps that free more than they
allocate move up, steps that allocate more than they free move down, past no step they conflict with.

Design: docs/design/training-step.md, section "lazytensor/step/step_order.py".
"""
from __future__ import annotations

import itertools


def memory_order(touches, lifetimes, fixed, overwrites, written=None) -> tuple:
    """(a new order of the steps: a permutation of range(len(touches)), how many steps moved up, how
    many moved down). touches[k]: the ids of the allocations step k reads or writes; lifetimes:
    {temporary's id: (bytes, first step, last step)} in the planner's order; fixed[k], overwrites[k]:
    see the module doc; written[k]: the ids of the allocations step k writes besides those it is the
    first to touch (a part of a concatenation, an all-reduce in place), or None for every one it touches.
    Each step in turn is placed after the steps before it; a step whose group (itself and the steps
    placed already whose temporaries only it reads: their makers) frees more bytes than it allocates
    outside the group goes, as a group, right after the last step it conflicts with. Then, from the
    last step to the first, a step that allocates more bytes than it frees goes right before the
    first step after it that it conflicts with or that is fixed, where the peak of live temporaries
    falls among the steps it passes."""
    n = len(touches)
    made: list = [set() for _ in range(n)]           # per step: the temporaries it is the first to touch
    for o, (_, first, _) in lifetimes.items():
        made[first].add(o)
    if written is None:
        written = [set()] * n
    writes = [set(touches[k]) if fixed[k] or overwrites[k] or written[k] is None else made[k] | (written[k] & touches[k])
              for k in range(n)]
    touchers: dict = {}                             # temporary -> the steps that touch it
    for k, owners in enumerate(touches):
        for o in owners:
            if o in lifetimes:
                touchers.setdefault(o, set()).add(k)

    def conflict(s, t) -> bool:
        shared = touches[s] & touches[t]
        return bool(shared) and bool(shared & (writes[s] | writes[t]))

    order: list = []
    up = 0
    for k in range(n):
        group = _group(k, order, touches, made, lifetimes, fixed, touchers)
        if group is not None:
            members = set(group)
            was = {s: i for i, s in enumerate(order)}
            rest = [s for s in order if s not in members]
            at = 0
            for i, s in enumerate(rest):
                if any(conflict(s, m) for m in group):
                    at = i + 1
            # a maker never moves down past a step it conflicts with, nor past a fixed step
            if not any(was[s] > was[m] and (fixed[s] or conflict(s, m)) for s in rest[:at] for m in group[:-1]):
                order = rest[:at] + group + rest[at:]
                up += len(group)
                continue
        order.append(k)
    order, down = _sunk(order, touches, made, lifetimes, fixed, touchers, conflict)
    return order, up, down


def _sunk(order, touches, made, lifetimes, fixed, touchers, conflict) -> tuple:
    """(order with each step that allocates more than it frees moved down as far as it can go, where
    the steps it passes hold the peak, how many moved). Taken from the last step to the first, so that
    a step's makers see it moved."""
    order = list(order)
    down = 0
    for i in range(len(order) - 1, -1, -1):
        k = order[i]
        if fixed[k] or not made[k]:
            continue
        at = {s: j for j, s in enumerate(order)}
        allocated = sum(lifetimes[o][0] for o in made[k] if touchers[o] != {k})
        freed = sum(lifetimes[o][0] for o in touches[k]
                    if o in lifetimes and o not in made[k] and max(at[s] for s in touchers[o]) == i)
        if allocated <= freed:
            continue
        j = i + 1
        while j < len(order) and not fixed[order[j]] and not conflict(order[j], k):
            j += 1
        live = _live(at, touchers, lifetimes, len(order))
        if j > i + 1 and max(live[i:j - 1]) == max(live):
            order = order[:i] + order[i + 1:j] + [k] + order[j:]
            down += 1
    return order, down


def _live(at, touchers, lifetimes, n) -> list:
    """The bytes of temporaries alive at each position of the order `at` ({step: position})."""
    change = [0] * (n + 1)
    for o, steps in touchers.items():
        positions = [at[s] for s in steps]
        change[min(positions)] += lifetimes[o][0]
        change[max(positions) + 1] -= lifetimes[o][0]
    return list(itertools.accumulate(change[:-1]))


def _group(k, order, touches, made, lifetimes, fixed, touchers):
    """[makers..., k] if moving them up frees memory, else None. A maker: a step whose temporaries
    k reads, and no other step."""
    if fixed[k] or not order:
        return None
    makers = [s for s in order if made[s] and not fixed[s] and all(touchers[o] == {s, k} for o in made[s])]
    group = makers + [k]
    inside = set().union(*(made[s] for s in makers)) if makers else set()
    allocated = sum(lifetimes[o][0] for o in made[k] if lifetimes[o][2] != k)
    freed = sum(lifetimes[o][0] for s in group for o in touches[s]
                if o in lifetimes and lifetimes[o][2] == s and o not in inside)
    return group if freed > allocated else None
