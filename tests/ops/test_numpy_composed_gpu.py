"""NumPy's composed functions (nan-reductions, order statistics, products, einsum, pad, isin,
unique, histogram, ...) on CUDA tensors against NumPy on the host: the lazy ones run as CUDA
kernels, the evaluated ones through CuPy, and every result stays on the device. Skipped where
CuPy or a CUDA device is missing."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402

RNG = np.random.default_rng(3)
X = RNG.standard_normal((5, 7, 3))
X[1, 2, :] = np.nan
X[0, 0, 0] = np.inf
A, B = RNG.standard_normal((6, 4)), RNG.standard_normal((4, 5))
I = RNG.integers(0, 9, (20,))

CASES = {
    "nansum": lambda m, x: m.nansum(x, axis=(0, 2)), "nanmean": lambda m, x: m.nanmean(x, axis=1),
    "nanmax": lambda m, x: m.nanmax(x, axis=2, keepdims=True), "nanmin": lambda m, x: m.nanmin(x),
    "nanstd": lambda m, x: m.nanstd(x, axis=0, ddof=1), "nanvar": lambda m, x: m.nanvar(x, axis=(1, 2)),
    "nanprod": lambda m, x: m.nanprod(x, axis=0), "nanargmax": lambda m, x: m.nanargmax(x, axis=1),
    "nancumsum": lambda m, x: m.nancumsum(x, axis=1), "median": lambda m, x: m.median(x, axis=1),
    "nanmedian": lambda m, x: m.nanmedian(x, axis=(0, 2)), "quantile": lambda m, x: m.quantile(x, [0.1, 0.9], axis=2),
    "percentile": lambda m, x: m.percentile(x, 30, axis=0, method="nearest"),
    "quantile lower": lambda m, x: m.quantile(x, [0.2, 0.7], axis=0, method="lower", keepdims=True),
    "average": lambda m, x: m.average(x, axis=1),
    "ptp": lambda m, x: m.ptp(x, axis=2), "isclose": lambda m, x: m.isclose(x, x + 1e-9, equal_nan=True),
    "trace": lambda m, x: m.trace(x), "diagonal": lambda m, x: m.diagonal(x, 1, 0, 2),
    "pad": lambda m, x: m.pad(x, ((1, 0), (0, 2), (1, 1)), constant_values=7.0),
    "pad edge": lambda m, x: m.pad(x, 2, mode="edge"), "pad reflect": lambda m, x: m.pad(x, 1, mode="reflect"),
    "isin": lambda m, x: m.isin(m.round(x), [0.0, 1.0, -1.0]), "argwhere": lambda m, x: m.argwhere(x > 1),
    "unique": lambda m, x: m.unique(m.round(x), return_counts=True),
}


def _host(r):
    if isinstance(r, tuple):
        return tuple(_host(v) for v in r)
    if isinstance(r, (lt.Tensor, lt.Expr)):
        assert r.device == "cuda"
        return r.numpy()
    return np.asarray(r)


def _same(got, want):
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("name", list(CASES))
def test_composed_functions_on_cuda(name):
    f = CASES[name]
    x = X if name not in ("nanargmax",) else np.nan_to_num(X, nan=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _host(f(np, x))
        got = _host(f(np, lt.asarray(x, device="cuda")))
    _same(got, want)


def test_products_einsum_counts_on_cuda():
    a, b = lt.asarray(A, device="cuda"), lt.asarray(B, device="cuda")
    for got, want in ((np.dot(a, b), np.dot(A, B)), (np.inner(a, a), np.inner(A, A)), (np.outer(a, b), np.outer(A, B)),
                      (np.einsum("ij,jk->ki", a, b), np.einsum("ij,jk->ki", A, B)),
                      (np.einsum("ii->", a[:4]), np.einsum("ii->", A[:4]))):
        _same(_host(got), want)
    i = lt.asarray(I, device="cuda")
    _same(_host(np.bincount(i, minlength=12)), np.bincount(I, minlength=12))
    _same(_host(np.histogram(lt.asarray(A, device="cuda"), bins=5)), np.histogram(A, bins=5))
    assert np.allclose(a, a) is True and np.array_equal(a, a * 1) is True
    w = np.arange(1.0, 5.0)
    _same(_host(np.average(a, axis=1, weights=lt.asarray(w, device="cuda"))), np.average(A, axis=1, weights=w))
