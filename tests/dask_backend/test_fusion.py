"""A blockwise chain Dask fused into one task runs as ONE kernel per chunk, and a reduction's chunk
step fuses with the elementwise work that feeds it (sum((a - b) ** 2) reads a and b once)."""
from __future__ import annotations

import numpy as np
import pytest

import lazytensor as lt

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

CHUNKS = 4


def arrays(n=2):
    rng = np.random.default_rng(0)
    hosts = [rng.random((400, 300)) for _ in range(n)]
    return hosts, [da.from_array(lt.asarray(h, device="cpu"), chunks=(100, 300)) for h in hosts]


def launches(x):
    """The launches of x's tasks (persisted: the chunks stay chunks, not joined into one result)."""
    x.persist(scheduler="sync")                 # compiled once
    with lt.profile() as p:
        kept = x.persist(scheduler="sync")
    return p.kernels, kept.compute(scheduler="sync")


def test_elementwise_chain_is_one_kernel_per_chunk():
    (h,), (d,) = arrays(1)
    kernels, result = launches((d * 2 + 1) ** 0.5 - da.sin(d))
    assert [k.kind for k in kernels] == ["elementwise"] * CHUNKS
    assert all(k.elements == 100 * 300 for k in kernels)
    np.testing.assert_array_max_ulp(np.asarray(result), (h * 2 + 1) ** 0.5 - np.sin(h), maxulp=4)


def test_sum_of_squared_differences_reads_each_chunk_once():
    (ha, hb), (a, b) = arrays(2)
    kernels, result = launches(((a - b) ** 2).sum())
    per_chunk = [k for k in kernels if k.elements == 100 * 300]
    assert [k.kind for k in per_chunk] == ["reduction"] * CHUNKS       # no elementwise pass writes a - b
    assert not [k for k in kernels if k.kind == "elementwise" and k.elements > 16]
    np.testing.assert_allclose(float(result), ((ha - hb) ** 2).sum(), rtol=1e-12)


def test_without_the_graph_pass_each_task_leaves_a_lazy_value():
    """The pass is what evaluates in the task: Dask's own optimization alone hands the expressions on."""
    (h,), (d,) = arrays(1)
    from dask.array.optimization import optimize
    with dask.config.set({"array_optimize": optimize}):
        graph = (d + 1).__dask_optimize__(dict((d + 1).__dask_graph__()), (d + 1).__dask_keys__())
    from dask._task_spec import execute_graph
    results = execute_graph(graph)
    assert any(type(v) is lt.Expr for v in results.values())
    with_pass = (d + 1).__dask_optimize__(dict((d + 1).__dask_graph__()), (d + 1).__dask_keys__())
    assert not any(type(v) is lt.Expr for v in execute_graph(with_pass).values())


def test_a_task_thread_runs_kernels_on_omp_num_threads(monkeypatch):
    """distributed's workers set OMP_NUM_THREADS=1 (their own threads share the cores): the threads
    that settle tasks run lazytensor's kernels on that many threads."""
    import threading

    import numba

    from lazytensor.dask_backend import tasks
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    seen = []

    def task_thread():
        before = numba.get_num_threads()
        tasks.settle(lt.asarray(np.ones(3), device="cpu"))
        seen.append((before, numba.get_num_threads()))
    t = threading.Thread(target=task_thread)
    t.start(); t.join()
    assert seen == [(numba.config.NUMBA_NUM_THREADS, 1)]


def test_settle_evaluates_what_a_task_returns():
    from lazytensor.dask_backend.tasks import settle
    t = lt.asarray(np.arange(4.0), device="cpu")
    assert type(settle(t * 2)) is lt.Tensor
    assert type(settle(t * 2, lazy_ok=True)) is lt.Expr             # read by one task: fuses into it
    assert type(settle(t.sum(), lazy_ok=True)) is lt.Tensor          # a reduction is evaluated in its task
    parts = settle({"n": np.ones(2), "total": (t * 3, [t + 1])})
    assert type(parts["total"][0]) is lt.Tensor and type(parts["total"][1][0]) is lt.Tensor
    assert parts["total"][0].numpy().tolist() == [0.0, 3.0, 6.0, 9.0]
    plain = {"n": np.ones(2), "total": [np.zeros(1)]}
    assert settle(plain) is plain
