"""How lazytensor measures time: host time of a call, and GPU time from CUDA events.

Design: docs/design/kernels.md, section "kernels/timing.py".
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Callable


def time_host(fn, repeat: int = 7, number: int = 1) -> float:
    """Median seconds per call of fn() over `repeat` rounds of `number` calls, after a warm-up."""
    fn()
    rounds = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - t) / number)
    return statistics.median(rounds)


def cpu_time(fn, repeat: int = 15) -> float:
    """The least process CPU seconds (every thread's, time.process_time) of one call of fn() over
    `repeat` calls, after a warm-up: on a machine whose cores other work shares, what a call
    costs; a wall clock there counts the other work's time slices too."""
    fn()
    best = math.inf
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def burst_ms(fn, bursts: int = 7, burst: int = 10, warmup: int = 3) -> float:
    """Median milliseconds per call of fn() over `bursts` bursts of `burst` calls, after `warmup` calls."""
    import cupy
    for _ in range(warmup):
        fn()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(bursts):
        start.record()
        for _ in range(burst):
            fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / burst)
    return statistics.median(times)


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
