"""Stand-in CUDA graphs for the CPU backend, so that the replay bookkeeping (capture, launch, the
results a graph hands out again, release) is tested in CI without a GPU."""
from __future__ import annotations

from lazytensor.kernels.cpu.backend import CpuBackend
from lazytensor.reuse import replay


class ReRun:
    """A stand-in graph: a launch runs the captured steps again over the same arrays, as a CUDA graph
    launches the same kernels with the same arguments."""

    def __init__(self, run):
        self.run, self.launches = run, 0

    def launch(self):
        self.launches += 1
        self.run()


def stand_in_graphs(monkeypatch) -> list:
    """Give the CPU backend stand-in graphs, every step taken as capturable; -> the graphs captured,
    in order (the caller releases them: lt.release_graphs())."""
    captured: list = []

    def capture(self, run):
        captured.append(ReRun(run))
        return captured[-1]

    monkeypatch.setattr(CpuBackend, "graphs", True)
    monkeypatch.setattr(CpuBackend, "capture", capture)
    monkeypatch.setattr(replay, "first_refusal", lambda steps: None)
    return captured
