"""Graph replay: a recipe's steps over the same arrays again, launched as one captured CUDA graph.

Design: docs/design/caches.md, section "lazytensor/reuse/replay.py".
"""
from __future__ import annotations

import collections
import functools
import os
import sys
import weakref

from lazytensor.reuse.bounded import make_room
from lazytensor.kernels import collectives, launch_log
from lazytensor.core.memory import owner
from lazytensor.plan.steps import Learned, first_refusal
from lazytensor.core.tensor import Tensor

ENABLED = os.environ.get("LAZYTENSOR_CUDA_GRAPHS", "1") != "0"


def _budget() -> int | None:
    """LAZYTENSOR_GRAPH_MEMORY (MB) in bytes: the temporaries all graphs may keep; None when unset
    (then budget() makes it from the device's memory)."""
    value = os.environ.get("LAZYTENSOR_GRAPH_MEMORY")
    if value is None:
        return None
    try:
        mb = float(value)
    except ValueError:
        mb = -1.0
    if not mb >= 0:
        raise ValueError(f"LAZYTENSOR_GRAPH_MEMORY is the memory CUDA graphs may keep, in MB (>= 0); got {value!r}")
    return int(mb * 2**20)


BUDGET = _budget()
_DEFAULT_MB = 1024      # the budget without LAZYTENSOR_GRAPH_MEMORY, or 1/16 of the device's memory if more
_device_budget: list = []


def budget(backend=None) -> int:
    """The bytes all graphs may keep: LAZYTENSOR_GRAPH_MEMORY where set, else 1/16 of the device's
    memory and at least 1024 MB. A training step keeps its temporaries in its graph (an MLP of
    4096-wide layers at batch 8192 in float16: about 550 MB); on a GPU of 141 GB the default lets
    graphs keep 8.8 GB, on one of 16 GB 1 GB."""
    if BUDGET is not None:
        return BUDGET
    if not _device_budget:
        total = None if backend is None else backend.memory_total()
        if total is None:
            return _DEFAULT_MB * 2**20
        _device_budget.append(max(_DEFAULT_MB * 2**20, total // 16))
    return _device_budget[0]
_MAX_GRAPHS = 8         # per recipe: a loop alternates between a few destinations at most
_MAX_FAILURES = 2       # failed captures before a recipe is run step by step for good
_kept = [0]             # bytes of temporaries kept by the graphs in _live
# Every captured graph, least recently launched first. A graph is found by addresses, which a loop's
# pool hands out again, so it cannot tell when its arrays are gone for good: graphs are released
# least recently used first when a new one needs the memory, or all at once by release_all().
_live: collections.OrderedDict = collections.OrderedDict()


class Replays:
    """The graphs of one recipe, by the addresses of its tensors and destination."""
    __slots__ = ("backend", "entries", "refusal", "failures", "captures", "replays", "busy")

    def __init__(self, backend):
        self.backend = backend
        self.entries: dict = {}     # key -> None (seen once) or ReplayStep
        self.refusal = None         # why this recipe's steps cannot be captured, once found
        self.failures = 0
        self.captures = 0
        self.replays = 0
        self.busy = 0               # calls run step by step because the caller still held the results

    def refuse(self, reason: str) -> None:
        self.refusal = reason
        self.release()

    def release(self) -> None:
        """Drop every graph of this recipe, and the temporaries they keep."""
        for entry in self.entries.values():
            _unlist(entry)
        self.entries.clear()

    def step_for(self, key):
        """The ReplayStep for `key` (captured, or to capture on its run), or None the first time the
        key is seen (then the steps run as they are)."""
        entries = self.entries
        entry = entries.get(key, _MISSING)
        if entry is None:
            entry = entries[key] = ReplayStep(self, key)
            return entry
        if entry is _MISSING:
            make_room(entries, _MAX_GRAPHS, _unlist)
            entries[key] = None
            return None
        return entry

    def forget(self, entry) -> None:
        _unlist(entry)
        if self.entries.get(entry.key) is entry:
            del self.entries[entry.key]

    def describe(self) -> str:
        return (f"{self.captures} captured, {self.replays} replays so far, {self.busy} calls step by step because "
                f"the previous results were still held; graphs keep {_kept[0] / 2**20:.1f} MB of temporaries "
                f"(budget {budget(self.backend) // 2**20} MB: LAZYTENSOR_GRAPH_MEMORY, or 1/16 of the device's memory)")


_MISSING = object()


class ReplayStep:
    """One captured CUDA graph of a recipe's steps and the temporaries it writes. Its first run
    captures the steps (then drops them) and launches the graph; later runs only launch it."""
    __slots__ = ("owner", "key", "graph", "steps", "temps", "results", "holders", "baseline", "keep", "record",
                 "count", "nbytes", "watched")

    def __init__(self, owner: Replays, key):
        self.owner, self.key = owner, key
        self.graph = self.steps = None
        self.temps = ()             # the allocations the graph reads and writes, kept for good
        self.results = ()           # per holder: [(name, Tensor or value)] handed out on every replay
        self.holders = ()           # weak references to the capturing call's holders, until captured
        self.baseline = ()          # reference counts of the handed-out Tensors when nothing outside held them
        self.keep = ()              # the steps' learned state: memory and kernels the graph uses
        self.record = None          # what lt.profile shows for a launch of the graph
        self.count = self.nbytes = 0
        self.watched = None         # what the NCCL watchdog is told after each launch (a graph holding collectives)

    def prepare(self, steps, temps, holders, results) -> None:
        """The steps to capture on the run, over `temps`, having given the holders `results`."""
        self.steps, self.temps, self.results = steps, temps, results
        self.holders = [weakref.ref(h) for h in holders]

    def hand_out(self, holders) -> bool:
        """Give the holders the graph's results again, if nothing else holds them (else False)."""
        if self._references(holders) != self.baseline:
            self.owner.busy += 1
            return False
        for h, results in zip(holders, self.results):
            for name, v in results:
                setattr(h, name, v)
        return True

    def _references(self, holders) -> tuple:
        """Per handed-out Tensor, the references to it (less the holder's attribute, if it holds it),
        to its array and to the array's allocation: a view of the memory adds one, and so does the
        array or the Tensor kept anywhere else."""
        counts = []
        for h, results in zip(holders, self.results):
            for name, v in results:
                if type(v) is Tensor:
                    a = v.data
                    counts.append((sys.getrefcount(v) - (getattr(h, name, None) is v), sys.getrefcount(a),
                                   sys.getrefcount(owner(a))))
        return tuple(counts)

    def run(self):
        graph = self.graph
        if graph is not None:
            graph.launch()
            if self.watched is not None:
                collectives.group().watch(self.watched)
            _live.move_to_end(self)
            self.owner.replays += 1
            if launch_log.listeners:
                launch_log.record(self.record)
            return
        self._capture()

    def _capture(self):
        steps, self.steps = self.steps, None
        owner = self.owner
        nbytes = sum(t.nbytes for t in self.temps)
        reason = first_refusal(steps)
        limit = budget(owner.backend)
        if reason is None and nbytes > limit // 4:
            reason = (f"its temporaries ({nbytes / 2**20:.1f} MB) exceed a quarter of the memory graphs may keep "
                      f"({limit // 2**20} MB: LAZYTENSOR_GRAPH_MEMORY, or 1/16 of the device's memory); "
                      f"set LAZYTENSOR_GRAPH_MEMORY above {4 * nbytes // 2**20} to replay it")
        if reason is not None:
            owner.refuse(reason)
            return _run_all(steps)
        while _kept[0] + nbytes > limit and _live:      # make room: the least recently launched go
            old = next(iter(_live))
            old.owner.forget(old)
        records: list = []
        try:
            with launch_log.listening(records):
                graph = owner.backend.capture(functools.partial(_run_all, steps))
        except Exception as e:  # noqa: BLE001  (whatever refused capture: the steps run as they are)
            # A step still learning (building a cuDNN graph, timing plans) cannot be captured either:
            # this key is tried again, and the recipe given up only after repeated failures.
            owner.failures += 1
            if owner.failures >= _MAX_FAILURES:
                owner.refuse(f"capture failed: {type(e).__name__}: {e}")
            else:
                owner.forget(self)
            return _run_all(steps)
        # One record per graph launch for lt.profile: the graph is one launch, of these steps.
        kernels = ", ".join(r.name for r in records)
        self.record = launch_log.KernelRecord("graph", owner.backend.name, "graph", sum(r.elements for r in records),
                                              "memory", 0.0, f"{len(steps)} steps" + (f", kernels {kernels}" if kernels else ""))
        self.keep = tuple(_learned(steps))
        self.count = len(steps)
        if any(getattr(s, "collective", False) for s in steps):
            self.watched = f"a CUDA graph of {len(steps)} steps holding NCCL collectives"
        del steps                               # the graph holds no arrays but its own temporaries
        self.nbytes = nbytes
        self.baseline = self._references([h() for h in self.holders])    # no one but the graph holds them now
        self.holders = ()
        self.graph = graph
        _live[self] = None
        _kept[0] += nbytes
        owner.captures += 1
        graph.launch()
        if self.watched is not None:
            collectives.group().watch(self.watched)
        if launch_log.listeners:
            launch_log.record(self.record)

    def describe(self, source: bool = True) -> str:
        return (f"CUDA graph replay of {self.count} steps, captured on an earlier call over the same arrays "
                f"(lt.explain shows the steps)")


def _unlist(entry) -> None:
    """Take a graph out of the list of live ones (its memory goes with its last reference)."""
    if entry is not None and _live.pop(entry, _MISSING) is not _MISSING:
        _kept[0] -= entry.nbytes


ON_RELEASE: list = []     # what else release_all() drops: memory kept for the graphs' sake, by higher layers


def release_all() -> None:
    """lt.release_graphs(): drop every captured CUDA graph and the temporaries it keeps (they go back
    to CuPy's memory pool), and the memory kept so that later calls find the same addresses; later
    calls capture again where they repeat."""
    while _live:
        old = next(iter(_live))
        old.owner.forget(old)
    for release in ON_RELEASE:
        release()


def _run_all(steps) -> None:
    for step in steps:
        step.run()


def _learned(steps):
    """The learned values of the steps (and of steps nested in them): what a graph must keep alive."""
    for step in steps:
        for name in getattr(type(step), "__slots__", ()):
            v = getattr(step, name, None)
            if isinstance(v, Learned) and v.value is not None:
                yield v.value
                workspace = getattr(v.value, "workspace", None)
                if workspace is not None:       # a shared cuDNN workspace may be replaced by a larger one
                    yield workspace
            elif isinstance(v, list) and v and hasattr(v[0], "run"):
                yield from _learned(v)
