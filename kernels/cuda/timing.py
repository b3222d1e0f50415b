"""GPU time per call, from CUDA events around bursts of back-to-back calls on CuPy's current stream.

Each call's host work (building an expression, planning, launching) overlaps the previous call's
kernels, as in a real loop, instead of idling the GPU inside the timed window: a time includes the
host cost only when the host, not the GPU, is the bottleneck. The benchmarks time every peer so, and
the CBR stage-1 choice compares its candidates so.
"""
from __future__ import annotations

import statistics


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
