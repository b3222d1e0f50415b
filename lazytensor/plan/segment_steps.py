"""The steps of segmented sums and of their values spread over the segments (lazytensor.ops.segments)."""
from __future__ import annotations

import time

import numpy as np

from lazytensor.kernels import launch_log
from lazytensor.kernels.program import describe
from lazytensor.plan.steps import Step, _indent


class SegmentSums(Step):
    """One pass over a flat array: the program's outputs summed per segment into out (k, segments)."""
    __slots__ = ("backend", "program", "segments", "acc", "out", "inputs", "scalars", "note")
    writes = ("out",)

    def __init__(self, backend, program, segments, acc, out, inputs, scalars, note=""):
        self.backend, self.program, self.segments, self.acc = backend, program, segments, acc
        self.out, self.inputs, self.scalars, self.note = out, inputs, scalars, note

    def run(self):
        self.backend.run_segment_sums(self.program, self.segments, self.out, self.inputs, self.scalars, self.acc)

    def describe(self, source: bool = True) -> str:
        s = self.segments
        head = (f"SegmentSums on {self.backend.name}: {self.out.shape[0]} sums over each of {len(s.sizes)} segments of "
                f"{s.length} elements in one pass, accumulating in {np.dtype(self.acc).name}, -> "
                f"{self.out.dtype.name} {tuple(self.out.shape)}; {self.program.n_inputs} array inputs")
        if self.note:
            head += f"\n  note: {self.note}"
        text = head + "\n" + _indent(describe(self.program))
        if source:
            text += "\n" + _indent(self.backend.explain_segment_sums(self.program, s, self.out, self.inputs, self.acc))
        return text


class SegmentBroadcast(Step):
    """out (the flat array) = values[s] over segment s, 0 between segments: one NumPy repeat."""
    __slots__ = ("backend", "segments", "values", "out", "repeats")
    writes = ("out",)

    def __init__(self, backend, segments, values, out):
        self.backend, self.segments, self.values, self.out = backend, segments, values, out
        reps, at = [], 0
        for start, n in zip(segments.starts, segments.sizes):
            reps += [start - at, n]
            at = start + n
        reps.append(segments.length - at)
        # gap, segment, gap, segment, ..., gap (a tuple: a step's array slots are the plan's memory)
        self.repeats = tuple(reps)

    def run(self):
        started = time.perf_counter()
        spread = np.zeros(2 * len(self.segments.sizes) + 1, self.out.dtype)
        spread[1::2] = self.values
        self.out[...] = np.repeat(spread, self.repeats)
        if launch_log.listeners:
            launch_log.record(launch_log.KernelRecord("segment_broadcast", self.backend.name, "elementwise",
                                                      self.segments.length, "none", 0.0,
                                                      f"NumPy repeat, {time.perf_counter() - started:.6f} s"))

    def describe(self, source: bool = True) -> str:
        s = self.segments
        return (f"SegmentBroadcast on {self.backend.name}: {len(s.sizes)} values spread over their segments of "
                f"{s.length} elements (0 between segments), -> {self.out.dtype.name} {tuple(self.out.shape)}")
