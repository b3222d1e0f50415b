"""Choosing the execution plan of a cuDNN graph: from an experience table, by timing, or cuDNN's first.

cuDNN ranks its plans by heuristics (modes A, then FALLBACK) and the first is not always the
fastest: on the H200 the spread between the best and the worst plan offered for one conv reaches
600x. So the first use of a shape times a few top-ranked candidates; an experience table measured
once per (GPU, cuDNN) replaces that timing; LAZYTENSOR_CBR_TUNE=0 takes the first plan that builds.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from lazytensor.kernels.timing import median_ms, time_launches
from .cudnn_errors import CudnnGraphRejected
from .cudnn_graphs import ConvGraph

# A candidate whose warm-up is this many times slower than the best median so far is not repeated.
GIVE_UP_FACTOR = 20.0
# Workspace above this is not worth a plan (the tables record the size of each winner).
MAX_WORKSPACE_BYTES = 2 << 30


@dataclass
class PlanTiming:
    index: int
    name: str
    median_ms: float
    workspace_bytes: int
    times_ms: list[float]
    gave_up: bool = False


@dataclass
class PlanChoice:
    """The plan a graph runs, how it was chosen, and what was measured on the way (for explain)."""

    index: int
    name: str
    workspace_bytes: int
    source: str  # "timed" | "table" | "heuristic"
    plan_count: int
    timings: list[PlanTiming] = field(default_factory=list)  # fastest first
    failures: dict[str, str] = field(default_factory=dict)  # plan name -> why it did not build or run
    rank: str = ""  # for a table's plan: "winner", "backup1" or "backup2"
    note: str = ""  # how the choice came about, where the table did not give the winner

    @property
    def times_ms(self) -> dict[str, float]:
        return {t.name: t.median_ms for t in self.timings}

    def describe(self) -> str:
        source = f"experience table {self.rank}" if self.source == "table" and self.rank else self.source
        head = f"plan {self.name} (#{self.index} of {self.plan_count} offered, {source}, workspace {self.workspace_bytes} B)"
        lines = [head] + ([f"  {self.note}"] if self.note else [])
        for t in self.timings:
            note = " (gave up after the warm-up)" if t.gave_up else ""
            lines.append(f"  {t.median_ms:9.4f} ms  #{t.index:<3} {t.name}{note}")
        for name, why in self.failures.items():
            lines.append(f"  failed      {name}: {why}")
        return "\n".join(lines)


def plan_index_by_name(cg: ConvGraph) -> dict[str, int]:
    return {cg.plan_name(i): i for i in range(cg.plan_count)}


def first_buildable_plan(cg: ConvGraph, failures: dict[str, str] | None = None) -> PlanChoice:
    """cuDNN's own choice: the first plan in heuristic order that builds."""
    failures = {} if failures is None else failures
    count = cg.plan_count
    for i in range(count):
        name = cg.plan_name(i)
        try:
            ws = cg.build_plan(i)
        except Exception as e:  # noqa: BLE001 - a plan that will not build is skipped, whatever the reason
            failures[name] = describe_error(e)
            continue
        return PlanChoice(i, name, ws, "heuristic", count, failures=failures)
    raise CudnnGraphRejected(cg.kind.value, cg.key, f"none of the {count} plans offered would build: {failures}")


def plan_from_names(cg: ConvGraph, names) -> tuple[PlanChoice | None, dict[str, str]]:
    """The first of `names` (an experience table's winner, backup1, backup2) that this graph offers and
    builds. `names` may be plain names or (rank, name) pairs, a None name for a rank that could not
    be read; the choice says which rank it was."""
    failures: dict[str, str] = {}
    offered = plan_index_by_name(cg)
    for item in names:
        rank, name = item if isinstance(item, tuple) else ("", item)
        if name is None:
            failures[f"{rank} (unreadable)"] = "the table's record of this rank has no plan name"
            continue
        index = offered.get(name)
        if index is None:
            failures[name] = "not offered by cuDNN for this graph"
            continue
        try:
            ws = cg.build_plan(index)
        except Exception as e:  # noqa: BLE001
            failures[name] = describe_error(e)
            continue
        note = f"the table's {', '.join(failed_ranks(names, name))} did not build" if rank not in ("", "winner") else ""
        return PlanChoice(index, name, ws, "table", cg.plan_count, failures=failures, rank=rank, note=note), failures
    return None, failures


def failed_ranks(names, upto=None) -> list[str]:
    """The ranks of (rank, name) pairs before the one named `upto` (all of them when None)."""
    ranks = []
    for item in names:
        rank, name = item if isinstance(item, tuple) else ("", item)
        if upto is not None and name == upto:
            break
        ranks.append(rank or repr(name))
    return ranks


def time_plans(
    cg: ConvGraph,
    pointers: dict[str, int],
    indices,
    runs: int,
    stop_after: int | None = None,
    deadline: float | None = None,
    best_so_far_ms: float = math.inf,
) -> tuple[list[PlanTiming], dict[str, str], bool]:
    """Build and time the plans at `indices` on the caller's buffers (their contents get overwritten).

    Stops once `stop_after` plans have been timed, or at `deadline` (time.monotonic()) once one has.
    `best_so_far_ms` (from earlier calls on the same graph) lets a hopeless plan stop after its warm-up.
    Returns (timings fastest first, failures by plan name, whether the deadline cut the list short).
    """
    import cupy

    operands = cg.operand_pointers(pointers)
    timings: list[PlanTiming] = []
    failures: dict[str, str] = {}
    best = best_so_far_ms
    for index in indices:
        if stop_after is not None and len(timings) >= stop_after:
            break
        if deadline is not None and timings and time.monotonic() > deadline:  # the first plan always runs
            return sorted(timings, key=lambda t: t.median_ms), failures, True
        name = cg.plan_name(index)
        try:
            ws = cg.build_plan(index)
            if ws > MAX_WORKSPACE_BYTES:
                failures[name] = f"needs {ws} workspace bytes, over the {MAX_WORKSPACE_BYTES} limit"
                continue
            workspace = cupy.empty(max(ws, 1), dtype=cupy.uint8)
            ws_ptr = workspace.data.ptr if ws else 0
            times, gave_up = time_launches(
                lambda: cg.launch(index, operands, ws_ptr), runs, give_up_ms=max(GIVE_UP_FACTOR * best, 1.0)
            )
            del workspace
        except Exception as e:  # noqa: BLE001 - a candidate that fails is recorded and skipped
            failures[name] = describe_error(e)
            continue
        t = PlanTiming(index, name, median_ms(times), ws, times, gave_up)
        best = min(best, t.median_ms)
        timings.append(t)
    return sorted(timings, key=lambda t: t.median_ms), failures, False


def fastest_plan(cg: ConvGraph, pointers: dict[str, int], candidates: int, runs: int) -> PlanChoice:
    """Time the first `candidates` plans that build (heuristic order) and keep the fastest."""
    timings, failures, _ = time_plans(cg, pointers, range(cg.plan_count), runs, stop_after=candidates)
    if not timings:
        return first_buildable_plan(cg, failures)
    best = timings[0]
    # Every timed plan stays built; executing by index needs no rebuild of the winner.
    return PlanChoice(best.index, best.name, best.workspace_bytes, "timed", cg.plan_count, timings, failures)


def describe_error(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}"
