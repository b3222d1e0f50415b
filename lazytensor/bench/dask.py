"""`python -m lazytensor bench --suite dask`: two reductions of float32 arrays held by a
dask.distributed LocalCluster (2 worker processes, 1 thread each), with lazytensor chunks against
NumPy chunks on the same cluster and against the same computation in this one lazytensor process
(both cores), and the floor: one read of each input at the copy bandwidth measured in the same run.
The size: LAZYTENSOR_BENCH_DASK="total_log2,chunk_log2" (default 28,24; --quick: 24,20)."""
from __future__ import annotations

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


def run_dask_bench(print_fn=print) -> Table:
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    from lazytensor.bench.cpu import _copy_bandwidth
    from lazytensor.kernels.timing import time_host
    total, chunk = _sizes()
    n = 1 << total
    table = Table("lazytensor: Dask arrays on a LocalCluster (2 processes x 1 thread), CPU", "Dask, NumPy chunks")
    bw = _copy_bandwidth(1 << 28)
    table.notes.append(f"copy bandwidth measured in this run: {bw / 1e9:.1f} GB/s (read + write)")
    cases = ((f"((d*2+1)**0.5 - sin(d)).sum(), 2^{total} f32 in 2^{chunk} chunks", sqrt_minus_sin, 1),
             (f"relu((a+b)*c+5*d).sum(), 2^{total} f32 in 2^{chunk} chunks", relu_sum, 4))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster):
        for case, f, inputs in cases:
            arrays = {}
            for backend in ("lazytensor", "numpy"):
                with dask.config.set({"array.backend": backend}):
                    rng = da.random.default_rng(0)
                    xs = [rng.random(n, dtype=np.float32, chunks=1 << chunk) for _ in range(inputs)]
                xs = [x.persist() for x in xs]
                wait(xs)
                arrays[backend] = xs
            lazy = f(da, *arrays["lazytensor"])
            plain = f(da, *arrays["numpy"])
            table.add(case, "Dask, lazytensor chunks", time_host(lambda: float(lazy.compute()), repeat=5))
            table.add(case, "Dask, NumPy chunks", time_host(lambda: float(plain.compute()), repeat=5))
            arrays.clear()
            local = [lt.asarray(np.random.default_rng(i).random(n, dtype=np.float32), device="cpu")
                     for i in range(inputs)]
            table.add(case, "one lazytensor process", time_host(lambda: float(f(lt, *local)), repeat=5))
            table.floor(case, inputs * n * 4 / bw, f"{inputs} read(s) of float32 at the copy bandwidth")
            local.clear()
    print_fn(table.render())
    return table
