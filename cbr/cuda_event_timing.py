"""Timing a GPU launch with CUDA events on CuPy's current stream.

Consecutive launches are bracketed by events with no wait between them, so a time includes the
host cost of a launch only when the host, not the GPU, is the bottleneck: that is the cost a user
pays. The host waits once per measurement, which is why this runs at tuning time only.
"""

from __future__ import annotations

import math
import statistics
from typing import Callable


def time_launches(launch: Callable[[], None], runs: int, give_up_ms: float = math.inf) -> tuple[list[float], bool]:
    """Milliseconds of each of `runs` launches after one timed warm-up.

    Returns (times, gave_up): when the warm-up alone takes longer than `give_up_ms` the candidate is
    hopeless, and only the warm-up time comes back (gave_up=True), sparing a slow plan's repeats.
    """
    import cupy

    stream = cupy.cuda.get_current_stream()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    launch()
    end.record(stream)
    end.synchronize()
    warm_up = cupy.cuda.get_elapsed_time(start, end)
    if warm_up > give_up_ms or runs <= 0:
        return [warm_up], True

    marks = [cupy.cuda.Event() for _ in range(runs + 1)]
    marks[0].record(stream)
    for i in range(runs):
        launch()
        marks[i + 1].record(stream)
    marks[-1].synchronize()
    return [cupy.cuda.get_elapsed_time(marks[i], marks[i + 1]) for i in range(runs)], False


def median_ms(times: list[float]) -> float:
    return float(statistics.median(times))
