"""Graph replay: a recipe's steps over the same memory again, launched as one captured CUDA graph.

A training loop evaluates the same structure on every call, and in the steady state its arrays sit
at the same addresses: its tensors are the same, and CuPy's memory pool hands the temporaries back
in the same order. A recipe's steps then launch exactly the same kernels with exactly the same
arguments as on an earlier call, so they are captured once into a CUDA graph and later calls launch
the graph: one launch instead of five to seven (cuDNN's included), with no Python per step.

The key of a graph is every address the steps use: the expression's tensors, the destination and
the fresh temporaries (with the recipe's signature, that fixes every kernel argument: scalars and
layouts are in the signature). A key is captured the second time it is seen, so a loop whose
addresses never repeat pays only for a dictionary lookup. Only steps that just enqueue work on the
current stream can be captured (no allocation, no host synchronization, no timing): each says so
through `capture_refusal()`, and a recipe with one that cannot is never replayed (lt.explain says
why). Memory the graph uses beyond the call's own arrays (a cuDNN workspace, loaded kernels) is
owned by the recipe's steps' learned state, which the graph keeps alive.
"""
from __future__ import annotations

import os

from lazytensor.kernels import launch_log
from lazytensor.steps import Learned

ENABLED = os.environ.get("LAZYTENSOR_CUDA_GRAPHS", "1") != "0"
_MAX_GRAPHS = 8         # per recipe: the address sets of a loop repeat with a short period
_MAX_FAILURES = 2       # failed captures before a recipe is run step by step for good


class Replays:
    """The graphs of one recipe, by the addresses its steps use."""
    __slots__ = ("backend", "entries", "refusal", "failures", "captures", "replays")

    def __init__(self, backend):
        self.backend = backend
        self.entries: dict = {}     # key -> None (seen once) or ReplayStep
        self.refusal = None         # why this recipe's steps cannot be captured, once found
        self.failures = 0
        self.captures = 0
        self.replays = 0

    def refuse(self, reason: str) -> None:
        self.refusal = reason
        self.entries.clear()

    def step_for(self, key):
        """The ReplayStep for `key` (captured, or to capture on its run), or None the first time the
        key is seen (then the steps run as they are)."""
        entries = self.entries
        entry = entries.get(key, _MISSING)
        if entry is None:
            entry = entries[key] = ReplayStep(self)
            return entry
        if entry is _MISSING:
            if len(entries) >= _MAX_GRAPHS:
                try:
                    del entries[next(iter(entries))]        # the oldest
                except (KeyError, RuntimeError, StopIteration):
                    pass                                    # another thread evicted it first
            entries[key] = None
            return None
        return entry


_MISSING = object()


class ReplayStep:
    """One captured CUDA graph of a recipe's steps. Its first run captures `steps` (then drops them:
    a graph holds no arrays) and launches the graph; later runs only launch it."""
    __slots__ = ("owner", "graph", "steps", "keep", "record", "count")

    def __init__(self, owner: Replays):
        self.owner = owner
        self.graph = None
        self.steps = None           # set by the recipe for the capturing call
        self.keep = ()              # the steps' learned state: memory and kernels the graph uses
        self.record = None          # what lt.profile shows for a launch of the graph
        self.count = 0

    def run(self):
        graph = self.graph
        if graph is not None:
            graph.launch()
            self.owner.replays += 1
            if launch_log.listeners:
                launch_log.record(self.record)
            return
        self._capture()

    def _capture(self):
        steps, self.steps = self.steps, None
        owner = self.owner
        reason = first_refusal(steps)
        if reason is not None:
            owner.refuse(reason)
            for step in steps:
                step.run()
            return
        records: list = []
        try:
            with launch_log.listening(records):
                graph = owner.backend.capture(lambda: [step.run() for step in steps])
        except Exception as e:  # noqa: BLE001  (whatever refused capture: the steps run as they are)
            # A step still learning (building a cuDNN graph, timing plans) cannot be captured either:
            # this key is tried again, and the recipe given up only after repeated failures.
            owner.failures += 1
            if owner.failures >= _MAX_FAILURES:
                owner.refuse(f"capture failed: {type(e).__name__}: {e}")
            else:
                owner.entries = {k: v for k, v in owner.entries.items() if v is not self}
            for step in steps:
                step.run()
            return
        # One record per graph launch for lt.profile: the graph is one launch, of these steps.
        kernels = ", ".join(r.name for r in records)
        self.record = launch_log.KernelRecord("graph", owner.backend.name, "graph", sum(r.elements for r in records),
                                              "memory", 0.0, f"{len(steps)} steps" + (f", kernels {kernels}" if kernels else ""))
        self.keep = tuple(_learned(steps))
        self.count = len(steps)
        self.graph = graph
        owner.captures += 1
        graph.launch()
        if launch_log.listeners:
            launch_log.record(self.record)

    def describe(self, source: bool = True) -> str:
        return (f"CUDA graph replay of {self.count} steps, captured on an earlier call over the same addresses "
                f"(lt.explain shows the steps)")


def capture_refusal(step) -> str | None:
    """Why `step` cannot be captured into a CUDA graph, or None when it can."""
    refusal = getattr(step, "capture_refusal", None)
    if refusal is None:
        return f"{type(step).__name__} steps cannot be captured"
    return refusal()


def first_refusal(steps) -> str | None:
    """The first reason one of `steps` cannot be captured, or None when all can."""
    return next(filter(None, (capture_refusal(s) for s in steps)), None)


def _learned(steps):
    """The learned values of the steps (and of steps nested in them): what a graph must keep alive."""
    for step in steps:
        for name in getattr(type(step), "__slots__", ()):
            v = getattr(step, name, None)
            if isinstance(v, Learned) and v.value is not None:
                yield v.value
            elif isinstance(v, list) and v and hasattr(v[0], "run"):
                yield from _learned(v)
