"""`bench --suite dask` at a small size (LAZYTENSOR_BENCH_DASK): its three implementations of both
cases, and the floor, in one table."""
from __future__ import annotations

import pytest

pytest.importorskip("distributed")


def test_the_dask_bench_runs_small(monkeypatch):
    from lazytensor.bench.dask import run_dask_bench
    monkeypatch.setenv("LAZYTENSOR_BENCH_DASK", "14,11")
    printed = []
    table = run_dask_bench(printed.append, "cpu")
    impls = {impl for _, impl, _ in table.rows}
    assert impls == {"Dask, lazytensor chunks", "Dask, NumPy chunks", "one lazytensor process"}
    assert len(table.rows) == 6 and len(table.floors) == 2
    assert all(seconds > 0 for _, _, seconds in table.rows)
    assert "2^14 f32 in 2^11 chunks" in printed[0]
