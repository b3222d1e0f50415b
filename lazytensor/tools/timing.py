"""Host time of a call, as the demo and the benchmarks measure it."""
from __future__ import annotations

import statistics
import time


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
