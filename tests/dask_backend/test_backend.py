"""The "lazytensor" array backend makes lazytensor chunks, and Dask's dispatch tables know them:
each result is a tensor with the NumPy-backed program's values."""
from __future__ import annotations

import numpy as np
import pytest

import lazytensor as lt

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


def both(make):
    """make() under the lazytensor backend and under NumPy's, computed."""
    out = {}
    for backend in ("lazytensor", "numpy"):
        with dask.config.set({"array.backend": backend}):
            x = make()
        out[backend] = (x, x.compute(scheduler="sync"))
    return out


@pytest.mark.parametrize("name, make", [
    ("ones", lambda: da.ones((7, 5), chunks=3, dtype=np.float32)),
    ("zeros", lambda: da.zeros((7,), chunks=2)),
    ("full", lambda: da.full((4, 4), -0.0, chunks=3)),
    ("empty shape", lambda: da.empty((5, 2), chunks=2).shape),
    ("arange", lambda: da.arange(3, 40, 3, chunks=4)),
    ("Generator.random", lambda: da.random.default_rng(7).random((9, 4), chunks=(4, 3))),
    ("Generator.normal", lambda: da.random.default_rng(7).normal(1.0, 2.0, size=(11,), chunks=5)),
    ("Generator.integers", lambda: da.random.default_rng(3).integers(0, 10, size=(8,), chunks=3)),
    ("RandomState.uniform", lambda: da.random.RandomState(5).uniform(size=(6, 6), chunks=4)),
])
def test_creation_makes_tensor_chunks_with_numpys_values(name, make):
    if name == "empty shape":
        with dask.config.set({"array.backend": "lazytensor"}):
            x = da.empty((5, 2), chunks=2)
        assert isinstance(x.compute(scheduler="sync"), lt.Tensor) and x.shape == (5, 2)
        return
    out = both(make)
    (lazy, got), (_, want) = out["lazytensor"], out["numpy"]
    assert isinstance(lazy._meta, lt.Tensor | lt.Expr) and isinstance(got, lt.Tensor)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)
    assert np.array_equal(np.signbit(got.numpy()), np.signbit(want))


def test_to_backend():
    x = da.from_array(np.arange(10.0), chunks=3).to_backend("lazytensor")
    assert isinstance(x._meta, lt.Tensor)
    assert isinstance(x.compute(scheduler="sync"), lt.Tensor)
    assert x.to_backend("numpy").compute(scheduler="sync").tolist() == list(np.arange(10.0))


host = np.random.default_rng(2).random((9, 6))
CASES = {
    "concatenate": lambda d: da.concatenate([d, d * 2], axis=1),
    "stack": lambda d: da.stack([d, d + 1]),
    "matmul": lambda d: d @ d.T,
    "tensordot": lambda d: da.tensordot(d, d, axes=([0], [0])),
    "take": lambda d: da.take(d, [0, 5, 2], axis=1),
    "fancy index": lambda d: d[[1, 7, 3]],
    "mean": lambda d: d.mean(axis=0),
    "var": lambda d: d.var(),
    "std ddof": lambda d: d.std(axis=1, ddof=1),
    "sum axis": lambda d: (d - 0.5).sum(axis=1),
    "argmax": lambda d: d.argmax(axis=0),
    "cumsum": lambda d: d.cumsum(axis=0),
    "rechunk": lambda d: (d * 3).rechunk((9, 2)),
    "transpose slice": lambda d: d.T[1:5, ::2] + 1,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dispatch_tables_and_reductions(name):
    f = CASES[name]
    got = f(da.from_array(lt.asarray(host, device="cpu"), chunks=(4, 4))).compute(scheduler="sync")
    want = f(da.from_array(host, chunks=(4, 4))).compute(scheduler="sync")
    assert isinstance(got, lt.Tensor)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, atol=1e-14)


def test_percentile_runs_numpys_on_host_copies():
    got = da.percentile(da.from_array(lt.asarray(host.ravel(), device="cpu"), chunks=10), [10, 50, 90])
    want = da.percentile(da.from_array(host.ravel(), chunks=10), [10, 50, 90])
    np.testing.assert_allclose(np.asarray(got.compute(scheduler="sync")), want.compute(scheduler="sync"))


def test_nan_reductions_give_numpys_values():
    with_nans = np.where(host > 0.5, np.nan, host)
    d = da.from_array(lt.asarray(with_nans, device="cpu"), chunks=4)
    n = da.from_array(with_nans, chunks=4)
    for f in (da.nansum, da.nanmean, da.nanmax, da.nanstd):
        np.testing.assert_allclose(np.asarray(f(d).compute(scheduler="sync")), f(n).compute(scheduler="sync"),
                                   rtol=1e-12, err_msg=f.__name__)
