"""Built cuDNN graphs with their chosen plan and workspace, one per (graph kind, conv shape, device).

Design: docs/design/cbr.md, section "cbr/cudnn_cache.py".
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field


from .conv_key import ConvKey
from .cudnn_errors import CudnnGraphRejected, CudnnOutOfMemory, is_out_of_memory
from .cudnn_graphs import ConvGraph, GraphKind, build_conv_graph
from .cudnn_handle import bind_current_stream, handle_for_device, import_cuda_modules
from .cudnn_plans import PlanChoice, fastest_plan, first_buildable_plan, plan_from_names
from .experience_table import ExperienceTable, ExperienceTableWarning


def env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return max(1, int(value))
    except ValueError:
        raise ValueError(f"{name} must be a positive integer; got {value!r}") from None


@dataclass
class CompiledConvGraph:
    """A graph ready to run: its built plan and its workspace (shared by the graphs of its kind)."""

    graph: ConvGraph
    plan: PlanChoice
    device_id: int
    workspace: object = None  # cupy uint8 array, or None when the plan needs none
    workspace_ptr: int = 0
    launches: int = field(default=0)

    def launch(self, pointers: dict[str, int]) -> None:
        """Enqueue the graph on CuPy's current stream with `pointers` (role -> device pointer)."""
        bind_current_stream(self.graph.handle)
        self.graph.launch(self.plan.index, self.graph.operand_pointers(pointers), self.workspace_ptr)
        self.launches += 1

    def relaunch(self, operands: list[int]) -> None:
        """launch() for a caller that already checked its buffers: device pointers in role order."""
        cupy, _ = import_cuda_modules()
        if cupy.cuda.runtime.getDevice() != self.device_id:
            with cupy.cuda.Device(self.device_id):
                self.relaunch(operands)
            return
        bind_current_stream(self.graph.handle)
        self.graph.launch(self.plan.index, operands, self.workspace_ptr)
        self.launches += 1

    def describe(self) -> str:
        return (
            f"cuDNN {self.graph.kind.value} graph for {self.graph.key} on device {self.device_id}, "
            f"launched through the {self.graph.launch_form(self.plan.index)}: {self.plan.describe()}"
        )


class ConvGraphCache:
    """(kind, ConvKey, device id) -> CompiledConvGraph, built on first use.

    tune/candidates/runs: None reads the LAZYTENSOR_CBR_TUNE* variables at build time.
    table: an ExperienceTable to use on every device, None for no table, or "auto" for the
    tables of each device's (GPU, cuDNN) found in cbr/tables/ (or LAZYTENSOR_CBR_TABLES).
    """

    def __init__(self, tune: bool | None = None, candidates: int | None = None, runs: int | None = None, table="auto"):
        self.tune = tune
        self.candidates = candidates
        self.runs = runs
        self.table = table
        self._device_tables: dict[int, ExperienceTable | None] = {}
        self._entries: dict[tuple, CompiledConvGraph] = {}
        self._rejected: dict[tuple, tuple] = {}   # -> CudnnGraphRejected's (kind, key, reason)
        self._workspaces: dict[tuple, object] = {}   # (kind, device id) -> the workspace its graphs share
        self.builds = 0  # graphs built (a rebuild would show here)
        self.hits = 0  # calls served by an entry already built

    def get(self, kind: GraphKind, key: ConvKey, device_id: int, pointers: dict[str, int]) -> CompiledConvGraph:
        """The compiled graph for (kind, key, device_id); `pointers` are the caller's buffers, used
        only to time candidate plans on a first call. Raises CudnnGraphRejected when cuDNN will not."""
        kind = GraphKind(kind)
        cache_key = (kind, key, device_id)
        entry = self._entries.get(cache_key)
        if entry is not None:
            self.hits += 1
            return entry
        rejected = self._rejected.get(cache_key)
        if rejected is not None:
            raise CudnnGraphRejected(*rejected)
        try:
            entry = self._build(kind, key, device_id, pointers)
        except CudnnGraphRejected as e:
            # Its words are kept, not the exception: a raised exception's traceback grows by every frame
            # it passes through, and would keep their arrays alive for good (the callers' buffers: a
            # forward's saved results, which a CUDA graph then never hands out again).
            self._rejected[cache_key] = (e.kind, e.key, e.reason)
            raise
        self._entries[cache_key] = entry
        return entry

    def entry(self, kind: GraphKind, key: ConvKey, device_id: int) -> CompiledConvGraph | None:
        """The compiled graph if it was built (for explain); never builds."""
        return self._entries.get((GraphKind(kind), key, device_id))

    def workspaces(self) -> list:
        """The bytes of each workspace the built graphs hold (one per graph kind and device)."""
        held = {id(e.workspace): e.workspace.nbytes for e in self._entries.values() if e.workspace is not None}
        return list(held.values())

    def clear(self) -> None:
        self._entries.clear()
        self._workspaces.clear()
        self._rejected.clear()
        self._device_tables.clear()

    def __len__(self) -> int:
        return len(self._entries)

    # ---- building ------------------------------------------------------------------------------
    def _build(self, kind: GraphKind, key: ConvKey, device_id: int, pointers: dict[str, int]) -> CompiledConvGraph:
        cupy, _ = import_cuda_modules()
        table = self._table_for(device_id)
        if table is not None:
            _warn_unreadable(table, kind, key)
            reason = table.rejection(kind, key)
            if reason is not None:
                raise CudnnGraphRejected(kind.value, key, f"{reason} (recorded in the experience table)")
        with cupy.cuda.Device(device_id):
            handle = handle_for_device(device_id)
            bind_current_stream(handle)
            graph = build_conv_graph(kind, key, handle)
            self.builds += 1
            plan = self._choose_plan(graph, table, pointers)
            workspace = None
            if plan.workspace_bytes:
                try:
                    workspace = self._shared_workspace(cupy, kind, device_id, plan.workspace_bytes)
                except Exception as e:
                    if not is_out_of_memory(e):
                        raise
                    raise CudnnOutOfMemory(f"the cuDNN workspace of plan {plan.name} for the {kind.value} graph of "
                                           f"{key}", plan.workspace_bytes, e) from e
        ptr = workspace.data.ptr if workspace is not None else 0
        return CompiledConvGraph(graph, plan, device_id, workspace, ptr)

    def _shared_workspace(self, cupy, kind: GraphKind, device_id: int, nbytes: int):
        """The workspace every graph of `kind` on the device shares, of at least `nbytes`: one per
        kind, as large as the largest of its graphs needs, rather than one per graph (their sum:
        47 MB for VGG16-BN at 32 px, batch 512, against 16 MB). Graphs of one kind never run at the
        same time: a stream runs its launches in order, and the one side stream (conv_grads' wgrad)
        joins the current one before the next step. When it grows, the graphs built before move to
        the new one; a CUDA graph captured over the old one keeps it alive (lazytensor.reuse.replay
        keeps its steps' learned values' workspaces)."""
        shared = self._workspaces.get((kind, device_id))
        if shared is not None and shared.nbytes >= nbytes:
            return shared
        shared = self._workspaces[(kind, device_id)] = cupy.empty(nbytes, dtype=cupy.uint8)
        for (k, _, d), entry in self._entries.items():
            if k == kind and d == device_id and entry.workspace is not None:
                entry.workspace, entry.workspace_ptr = shared, shared.data.ptr
        return shared

    def _choose_plan(self, graph: ConvGraph, table: ExperienceTable | None, pointers: dict[str, int]) -> PlanChoice:
        failures: dict[str, str] = {}
        if table is not None:
            entry, problem = table.entry_problem(graph.kind, graph.key)
            if problem is not None:
                choice = first_buildable_plan(graph, failures)
                choice.note = (f"cuDNN's heuristics: the experience table's entry in {table.file_of(graph.key)} "
                               f"cannot be read ({problem})")
                return choice
            ranked = table.ranked_plans(graph.kind, graph.key)
            if ranked:
                choice, failures = plan_from_names(graph, ranked)
                if choice is not None:
                    return choice
                # A shape the table lists is never timed: cuDNN's own first choice, and say why.
                choice = first_buildable_plan(graph, failures)
                choice.note = (f"cuDNN's heuristics: none of the experience table's plans "
                               f"({', '.join(rank for rank, _ in ranked)}) builds here")
                return choice
        tune = self.tune if self.tune is not None else env_flag("LAZYTENSOR_CBR_TUNE", True)
        if tune:
            candidates = self.candidates or env_int("LAZYTENSOR_CBR_TUNE_CANDIDATES", 4)
            runs = self.runs or env_int("LAZYTENSOR_CBR_TUNE_RUNS", 3)
            choice = fastest_plan(graph, pointers, candidates, runs)
            choice.failures = {**failures, **choice.failures}
            return choice
        return first_buildable_plan(graph, failures)

    def _table_for(self, device_id: int) -> ExperienceTable | None:
        if self.table is None or isinstance(self.table, ExperienceTable):
            return self.table
        if device_id not in self._device_tables:
            self._device_tables[device_id] = load_device_table(device_id)
        return self._device_tables[device_id]


_reported_entries: set = set()


def _warn_unreadable(table: ExperienceTable, kind: GraphKind, key: ConvKey) -> None:
    """One ExperienceTableWarning per table entry (or rank of one) that cannot be read, naming its file."""
    _, problem = table.entry_problem(kind, key)
    if problem is None:
        bad = [rank for rank, name in table.ranked_plans(kind, key) if name is None]
        if not bad:
            return
        problem = f"its {', '.join(bad)} record{'s have' if len(bad) > 1 else ' has'} no plan name"
        fallback = "the next rank that can be read, else cuDNN's heuristics"
    else:
        fallback = "cuDNN's heuristics"
    where = table.file_of(key)
    if (where, kind, key) in _reported_entries:
        return
    _reported_entries.add((where, kind, key))
    warnings.warn(f"lazytensor cannot read the entry of the experience table {where} for the {kind.value} graph of "
                  f"{key} ({problem}): its plan comes from {fallback}", ExperienceTableWarning, stacklevel=3)


def load_device_table(device_id: int) -> ExperienceTable | None:
    """The merged experience tables of this device's (GPU, cuDNN), or None when there are none or they are off."""
    setting = os.environ.get("LAZYTENSOR_CBR_TABLES", "").strip()
    if setting.lower() in ("0", "off", "false", "no"):
        return None
    gpu, version = device_identity(device_id)
    table = ExperienceTable.for_device(gpu, version, setting or None)
    return table if len(table) else None


def device_identity(device_id: int) -> tuple[str, int]:
    """(GPU name, cuDNN backend version) naming this device's experience tables."""
    cupy, cudnn = import_cuda_modules()
    name = cupy.cuda.runtime.getDeviceProperties(device_id)["name"]
    if isinstance(name, bytes):
        name = name.decode(errors="replace")
    return name.strip(), int(cudnn.backend_version())


_default_cache: ConvGraphCache | None = None


def default_cache() -> ConvGraphCache:
    """The process-wide cache the cuDNN conv functions use unless handed another."""
    global _default_cache
    if _default_cache is None:
        _default_cache = ConvGraphCache()
    return _default_cache
