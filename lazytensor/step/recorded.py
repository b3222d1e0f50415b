"""A simultaneous assignment planned once and run again: the plan of a training step.

Design: docs/design/training-step.md, section "lazytensor/step/recorded.py".
"""
from __future__ import annotations

from lazytensor.core.readers import memory_of
from lazytensor.reuse import replay as graph_replay
from lazytensor.assign.evaluate import check_writable, retry_out_of_memory
from lazytensor.step.memory_plan import MemoryPlan
from lazytensor.plan.planning_space import PlanningSpace
from lazytensor.plan.several import plan_several
from lazytensor.assign.simultaneous import checked_pairs, settled
from lazytensor.plan.steps import run_steps
from lazytensor.assign.writes import after_write, before_write


class RecordedAssignment:
    """lt.assign(pairs), planned and run once, kept to be run again by run()."""

    def __init__(self, pairs, what: str = "train_step"):
        pairs = checked_pairs(pairs, what)
        devices = {d.device for d, _ in pairs}
        if len(devices) != 1:
            raise ValueError(f"lt.{what}: every result must live on one device; got {sorted(devices)}")
        dests = [d for d, _ in pairs]
        values = [n for _, n in pairs]
        for d in dests:
            check_writable(d)
        self.backend = dests[0].backend
        self.device = dests[0].device
        self.dests = dests
        self.outs = [d.data for d in dests]
        self.memories = [memory_of(d) for d in dests]
        reads = before_write(dests, values)
        nodes = [(d.data, settled(n)) for d, n in pairs]
        # Planned over placeholders (no memory): the steps are rebuilt over the arena before they run.
        with PlanningSpace(self.backend) as space:
            planned = retry_out_of_memory(lambda: plan_several(nodes, self.backend))
        self.memory = MemoryPlan(planned, [n for _, n in nodes], self.outs, self.backend, space)
        self.steps = self.memory.steps
        planned = nodes = None
        self.graph = None           # the ReplayStep launching the steps as one CUDA graph, once captured
        self.graph_note = None      # why the steps are not one graph, where they are not
        self.runs = 0
        run_steps(self.steps, self.outs)
        self.runs = 1
        after_write(dests, values, reads)
        for m in self.memories:
            m.version += 1

    def run(self) -> None:
        """The recorded steps again (from the second run on CUDA: as one CUDA graph)."""
        memories = self.memories
        if any(memories):               # live expressions read a destination: they keep their values
            before_write(self.dests, ())
        graph = self.graph
        if graph is not None and self._replays.entries.get("step") is not graph:
            graph = self.graph = None   # released (lt.release_graphs, or to free memory): captured again below
            self.runs = 1
        if graph is None and self.runs == 1:
            graph = self._graph()
        if graph is not None:
            graph.run()
            if graph.graph is None:     # the capture was refused or failed: the steps ran one by one
                refusal = self._replays.refusal
                self.graph_note = f"no CUDA graph: {refusal or 'the capture failed'}; the steps run one by one"
                self.graph = None
        else:
            run_steps(self.steps, self.outs)
        self.runs += 1
        for m in memories:
            m.version += 1

    def _graph(self):
        """A ReplayStep to capture the steps on its first run, or None (and graph_note says why)."""
        if not self.backend.graphs:
            self.graph_note = f"no CUDA graph: the {self.backend.name} backend has none; the steps run one by one"
            return None
        if not graph_replay.ENABLED:
            self.graph_note = "no CUDA graph: LAZYTENSOR_CUDA_GRAPHS=0; the steps run one by one"
            return None
        reason = graph_replay.first_refusal(self.steps)
        if reason is not None:
            self.graph_note = f"no CUDA graph: {reason}; the steps run one by one"
            return None
        replays = graph_replay.Replays(self.backend)
        replays.step_for("step")
        entry = replays.step_for("step")
        # temps=(): the arena belongs to this plan, so it is not counted against LAZYTENSOR_GRAPH_MEMORY
        entry.prepare(self.steps, (), [], [])
        self.graph = entry
        self._replays = replays
        return entry

    def release(self) -> None:
        """Drop the CUDA graph (a plan no longer used: its arena goes with its last reference)."""
        replays = getattr(self, "_replays", None)
        if replays is not None:
            replays.release()
        self.graph = None

    def describe_graph(self) -> str:
        graph = self.graph
        if graph is not None and graph.graph is not None:
            return (f"CUDA graph: the whole step is ONE graph of {graph.count} steps, captured on the second call; "
                    f"{self._replays.replays} launches since")
        if self.graph_note is not None:
            return self.graph_note
        if not self.backend.graphs:
            return f"no CUDA graph: the {self.backend.name} backend has none; the steps run one by one"
        refusal = getattr(getattr(self, "_replays", None), "refusal", None)
        if refusal is not None:
            return f"no CUDA graph: {refusal}; the steps run one by one"
        return "CUDA graph: the second call captures the whole step as one graph; later calls launch it"
