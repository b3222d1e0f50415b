"""scikit-learn's estimators that stand on the Array API's linalg extension, with array API dispatch
on lazytensor arrays, give NumPy's results (rtol 1e-7 in float64): PCA with each solver (full,
covariance_eigh, randomized), LinearDiscriminantAnalysis and Ridge(solver="svd"). Skipped where
scikit-learn is not installed (the `clients` extra)."""
from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("SCIPY_ARRAY_API", "1")       # read once, when SciPy is first imported
sklearn = pytest.importorskip("sklearn")

from sklearn.decomposition import PCA  # noqa: E402
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis  # noqa: E402
from sklearn.linear_model import Ridge  # noqa: E402

import lazytensor.array_api as xp  # noqa: E402


def _writes_to_lazy_results() -> bool:
    """Whether item assignment into an expression works (scikit-learn writes into what operators return)."""
    try:
        y = xp.exp(xp.asarray([1.0, -2.0]))
        y[y < 1] = 0.0
        return True
    except TypeError:
        return False


def _dispatch():
    from scipy._lib._array_api import SCIPY_ARRAY_API
    if not SCIPY_ARRAY_API:
        pytest.skip("SciPy was imported before SCIPY_ARRAY_API=1 was set")
    return sklearn.config_context(array_api_dispatch=True)


def _data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 7)) * np.linspace(0.5, 3, 7)
    y = X @ rng.standard_normal(7) + rng.standard_normal(60)
    labels = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 1.0)
    return X, y, labels


def _same(got, want):
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("solver", ["full", "covariance_eigh", "randomized"])
def test_pca(solver):
    X, _, _ = _data()
    make = lambda: PCA(3, svd_solver=solver, random_state=0, power_iteration_normalizer="QR")  # noqa: E731
    numpys = make().fit(X)
    want = numpys.transform(X)
    with _dispatch():
        ours = make().fit(xp.asarray(X))
        got = ours.transform(xp.asarray(X))
    _same(got, want)
    for name in ("components_", "explained_variance_", "singular_values_", "mean_"):
        _same(getattr(ours, name), getattr(numpys, name))


@pytest.mark.xfail(not _writes_to_lazy_results(), reason="writes to lazy results", raises=TypeError, strict=True)
def test_linear_discriminant_analysis():
    X, _, labels = _data()
    numpys = LinearDiscriminantAnalysis().fit(X, labels)
    with _dispatch():
        ours = LinearDiscriminantAnalysis().fit(xp.asarray(X), xp.asarray(labels))
        got = ours.predict_proba(xp.asarray(X))
        transformed = ours.transform(xp.asarray(X))
    _same(got, numpys.predict_proba(X))
    _same(transformed, numpys.transform(X))


def test_ridge_svd():
    X, y, _ = _data()
    numpys = Ridge(alpha=0.7, solver="svd").fit(X, y)
    with _dispatch():
        ours = Ridge(alpha=0.7, solver="svd").fit(xp.asarray(X), xp.asarray(y))
        got = ours.predict(xp.asarray(X))
    _same(got, numpys.predict(X))
    _same(ours.coef_, numpys.coef_)
