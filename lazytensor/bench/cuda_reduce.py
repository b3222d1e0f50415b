"""The GPU reduction cases, with their peers and the floor measured in the same run:
1. sum((a - b)**2) over 2**28 float32 (one fused kernel),
2. the per-channel sum of an NHWC tensor viewed as (2**22, 64), along axis 0,
3. x - x.mean(axis=0) on that tensor (a reduction step, then an elementwise step).

Floor = bytes that must move / the bandwidth of a CuPy copy of 1 GiB measured here. GPU times come
from CUDA events around bursts of back-to-back calls, after warm-up, median per call, on data much
larger than the 60 MB L2. A peer that fails prints its error in the notes instead of stopping the table.
"""
from __future__ import annotations

import statistics

import numpy as np

from lazytensor.kernels.timing import burst_ms

from lazytensor.bench.table import Table

FLAT = 1 << 28
ROWS, CHANNELS = 1 << 22, 64
REPEAT = 15
SLOW_PEER_SECONDS = 0.05      # peers slower than this get three timed runs, not REPEAT


def _gpu_seconds(cp, fn, repeat=REPEAT, warmup=2) -> float:
    """Seconds per call over bursts of back-to-back calls (kernels/timing.py), as the other
    suites time; a peer slower than SLOW_PEER_SECONDS is timed by three single calls instead."""
    for _ in range(warmup):
        fn()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    fn()
    end.record()
    end.synchronize()
    once = cp.cuda.get_elapsed_time(start, end) * 1e-3
    if once > SLOW_PEER_SECONDS:
        times = [once]
        for _ in range(2):
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end) * 1e-3)
        return statistics.median(times)
    return burst_ms(fn, bursts=repeat, burst=10, warmup=0) * 1e-3


def copy_bandwidth(cp) -> float:
    """Bytes per second (read + write) of cupy.copyto between two 1 GiB arrays."""
    src = cp.ones(1 << 28, cp.float32)
    dst = cp.empty_like(src)
    seconds = _gpu_seconds(cp, lambda: cp.copyto(dst, src))
    return 2 * src.nbytes / seconds


def _peer(table, notes, cp, case, name, fn):
    try:
        table.add(case, name, _gpu_seconds(cp, fn))
    except Exception as exc:       # noqa: BLE001 - a failing peer is reported, not fatal
        notes.append(f"{case} / {name}: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _torch_peers(table, notes, cp, case, torch, fn, arrays):
    if torch is None:
        notes.append(f"{case}: torch with CUDA is not importable, no torch peers")
        return
    views = [torch.from_dlpack(a) for a in arrays]
    _peer(table, notes, cp, case, "torch eager", lambda: fn(*views))
    try:
        compiled = torch.compile(fn, dynamic=False)
    except Exception as exc:       # noqa: BLE001
        notes.append(f"{case} / torch.compile: {type(exc).__name__}: {exc}")
        return
    _peer(table, notes, cp, case, "torch.compile", lambda: compiled(*views))


def _squared_difference_sum(table, notes, cp, lt, torch, bandwidth):
    case = "1. sum((a-b)**2), 2^28 float32"
    rng = cp.random.default_rng(0)
    a = rng.standard_normal(FLAT, dtype=cp.float32)
    b = rng.standard_normal(FLAT, dtype=cp.float32)
    ta, tb = lt.asarray(a), lt.asarray(b)
    result = lt.empty((), np.float32, device="cuda")

    def run_lt():
        result[...] = lt.sum((ta - tb) ** 2)

    table.add(case, "lazytensor", _gpu_seconds(cp, run_lt))
    reference = float(cp.sum((a.astype(cp.float64) - b) ** 2))
    error = abs(float(result.numpy()) - reference) / reference
    notes.append(f"{case}: lazytensor relative error vs a float64 sum {error:.1e}")
    _peer(table, notes, cp, case, "CuPy eager", lambda: cp.sum((a - b) ** 2))
    kernel = cp.ReductionKernel("T a, T b", "T y", "(a - b) * (a - b)", "a + b", "y = a", "0", "lt_bench_sqdiff")
    _peer(table, notes, cp, case, "cupy.ReductionKernel", lambda: kernel(a, b))
    _torch_peers(table, notes, cp, case, torch, lambda x, y: ((x - y) ** 2).sum(), [a, b])
    table.floor(case, 2 * a.nbytes / bandwidth, "read a and b once")


def _per_channel_sum(table, notes, cp, lt, torch, bandwidth, x):
    case = "2. per-channel sum, (2^22, 64) float32, axis 0"
    tx = lt.asarray(x)
    result = lt.empty((CHANNELS,), np.float32, device="cuda")

    def run_lt():
        result[...] = tx.sum(axis=0)

    table.add(case, "lazytensor", _gpu_seconds(cp, run_lt))
    reference = x.astype(cp.float64).sum(axis=0)
    error = float(cp.max(cp.abs(result.data - reference) / cp.sum(cp.abs(x.astype(cp.float64)), axis=0)))
    notes.append(f"{case}: lazytensor error / sum|x| per channel at most {error:.1e}")
    _peer(table, notes, cp, case, "CuPy eager", lambda: x.sum(axis=0))
    _torch_peers(table, notes, cp, case, torch, lambda v: v.sum(dim=0), [x])
    table.floor(case, x.nbytes / bandwidth, "read x once")


def _centred(table, notes, cp, lt, torch, bandwidth, x):
    case = "3. x - x.mean(axis=0), (2^22, 64) float32"
    tx = lt.asarray(x)
    y = lt.empty(x.shape, np.float32, device="cuda")

    def run_lt():
        y[...] = tx - tx.mean(axis=0)

    table.add(case, "lazytensor (2 steps)", _gpu_seconds(cp, run_lt))
    if not cp.allclose(y.data, x - x.mean(axis=0), rtol=1e-5, atol=1e-5):
        notes.append(f"{case}: lazytensor's result differs from CuPy's")
    _peer(table, notes, cp, case, "CuPy eager", lambda: x - x.mean(axis=0))
    _torch_peers(table, notes, cp, case, torch, lambda v: v - v.mean(dim=0), [x])
    table.floor(case, 3 * x.nbytes / bandwidth, "read x for the mean, then read x and write y")


def run_cuda_reduction_bench(print_fn=print) -> None:
    import cupy as cp

    import lazytensor as lt
    torch = _torch()
    bandwidth = copy_bandwidth(cp)
    table = Table("CUDA reductions: GPU time per call, CUDA events, median", "CuPy eager")
    notes = [f"bandwidth: cupy.copyto of 1 GiB moves {bandwidth / 1e12:.2f} TB/s (read + write)"]
    _squared_difference_sum(table, notes, cp, lt, torch, bandwidth)
    cp.get_default_memory_pool().free_all_blocks()
    x = cp.random.default_rng(1).standard_normal((ROWS, CHANNELS), dtype=cp.float32)
    _per_channel_sum(table, notes, cp, lt, torch, bandwidth, x)
    _centred(table, notes, cp, lt, torch, bandwidth, x)
    table.notes += [""] + notes
    print_fn(table.render())
