"""`python -m lazytensor bench --suite dask [--device cuda]`: two reductions of float32 arrays held by
a dask.distributed cluster, with lazytensor chunks against NumPy chunks (CPU: a LocalCluster of 2
worker processes, 1 thread each) or CuPy chunks (CUDA: dask-cuda's LocalCUDACluster where it is
installed, else one worker process holding the GPU) on the same cluster, and against the same
computation in this one lazytensor process (CPU: both cores), and the floor: one read of each input
at the copy bandwidth measured in the same run.
The size: LAZYTENSOR_BENCH_DASK="total_log2,chunk_log2" (default 28,24; --quick: 24,20)."""
from __future__ import annotations

import contextlib
import os

import numpy as np

import lazytensor as lt
from lazytensor.bench.table import Table


def _sizes() -> tuple:
    spec = os.environ.get("LAZYTENSOR_BENCH_DASK") or ("24,20" if os.environ.get("LAZYTENSOR_BENCH_QUICK") else "28,24")
    total, chunk = (int(v) for v in spec.split(","))
    return total, chunk


def sqrt_minus_sin(xp, d):
    return ((d * 2 + 1) ** 0.5 - xp.sin(d)).sum()


def relu_sum(xp, a, b, c, d):
    return xp.maximum((a + b) * c + 5 * d, 0).sum()


@contextlib.contextmanager
def _device_for_workers(device: str):
    """LAZYTENSOR_DEVICE for this process and the workers it starts (they inherit the environment):
    the backend makes its chunks there."""
    before = os.environ.get("LAZYTENSOR_DEVICE")
    os.environ["LAZYTENSOR_DEVICE"] = device
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("LAZYTENSOR_DEVICE", None)
        else:
            os.environ["LAZYTENSOR_DEVICE"] = before


def _cluster(device: str):
    from distributed import LocalCluster
    if device == "cpu":
        return LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                            silence_logs=40), "LocalCluster, 2 processes x 1 thread"
    try:
        from dask_cuda import LocalCUDACluster
        return LocalCUDACluster(dashboard_address=None, silence_logs=40), "dask-cuda LocalCUDACluster"
    except ImportError:
        return LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                            silence_logs=40), "LocalCluster, 1 process holding the GPU"


def _bandwidth(device: str) -> float:
    if device == "cpu":
        from lazytensor.bench.cpu import _copy_bandwidth
        return _copy_bandwidth(1 << 28)
    import cupy
    from lazytensor.bench.cuda import copy_bandwidth
    return max(copy_bandwidth(cupy).values())


def _local_inputs(device: str, n: int, count: int):
    return [lt.asarray(np.random.default_rng(i).random(n, dtype=np.float32), device=device) for i in range(count)]


def _time_compute(expr) -> float:
    from lazytensor.kernels.timing import time_host
    return time_host(lambda: float(expr.compute()), repeat=5)


def run_dask_bench(print_fn=print, device: str = "cpu") -> Table:
    import dask
    import dask.array as da
    from distributed import Client, wait

    from lazytensor.kernels.timing import time_host
    total, chunk = _sizes()
    n = 1 << total
    peer = "numpy" if device == "cpu" else "cupy"
    baseline = f"Dask, {'NumPy' if device == 'cpu' else 'CuPy'} chunks"
    bw = _bandwidth(device)
    cases = ((f"((d*2+1)**0.5 - sin(d)).sum(), 2^{total} f32 in 2^{chunk} chunks", sqrt_minus_sin, 1),
             (f"relu((a+b)*c+5*d).sum(), 2^{total} f32 in 2^{chunk} chunks", relu_sum, 4))
    with _device_for_workers(device):
        cluster, kind = _cluster(device)
        table = Table(f"lazytensor: Dask arrays on a {kind}, {device}", baseline)
        table.notes.append(f"copy bandwidth measured in this run: {bw / 1e9:.1f} GB/s (read + write)")
        with cluster, Client(cluster):
            for case, f, inputs in cases:
                # one implementation's inputs in memory at a time (the size: 4 GiB each)
                for backend, impl in (("lazytensor", "Dask, lazytensor chunks"), (peer, baseline)):
                    with dask.config.set({"array.backend": backend}):
                        rng = da.random.default_rng(0)
                        xs = [rng.random(n, dtype=np.float32, chunks=1 << chunk) for _ in range(inputs)]
                    xs = [x.persist() for x in xs]
                    wait(xs)
                    table.add(case, impl, _time_compute(f(da, *xs)))
                    del xs
                local = _local_inputs(device, n, inputs)
                table.add(case, "one lazytensor process", time_host(lambda: float(f(lt, *local)), repeat=5))
                table.floor(case, inputs * n * 4 / bw, f"{inputs} read(s) of float32 at the copy bandwidth")
                local.clear()
    print_fn(table.render())
    return table
