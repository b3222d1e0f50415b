"""xp.linalg, the Array API's linalg extension: every function of the standard's list, with its
signature (arrays positional-only, options keyword-only), named tuples, and the standard's default
tolerances where NumPy's differ (pinv); the results NumPy's np.linalg gives for the same call."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import lazytensor.array_api as xp

NAMES = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm",
         "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd",
         "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]


@pytest.mark.parametrize("name", NAMES)
def test_every_function_has_the_standards_signature(name):
    ours = inspect.signature(getattr(xp.linalg, name))
    numpys = inspect.signature(getattr(np.linalg, name))     # NumPy 2's np.linalg follows the standard here
    kinds = lambda s: [(p.name if p.kind is not p.POSITIONAL_ONLY else None, p.kind) for p in s.parameters.values()  # noqa: E731
                       if p.name not in ("hermitian", "rcond", "UPLO", "tol", "compute_uv")]
    if name in ("qr", "svd", "eigh", "eigvalsh", "matrix_power", "pinv", "matrix_rank", "solve", "inv", "det",
                "slogdet"):
        # np.linalg keeps NumPy's older positional-or-keyword spellings for these.
        assert all(p.kind in (p.POSITIONAL_ONLY, p.KEYWORD_ONLY) for p in ours.parameters.values())
    else:
        assert kinds(ours) == kinds(numpys)


def test_pinv_and_matrix_rank_take_the_standards_default_tolerance():
    a = np.diag([1.0, 8e-16, 0.0])     # between the standard's 3 * eps and NumPy's 1e-15
    x = xp.asarray(a)
    np.testing.assert_array_equal(np.asarray(xp.linalg.pinv(x)), np.linalg.pinv(a, rtol=None))
    assert not np.array_equal(np.linalg.pinv(a, rtol=None), np.linalg.pinv(a))     # the defaults differ
    assert int(xp.linalg.matrix_rank(x)) == np.linalg.matrix_rank(a) == 2


def test_results_and_named_tuples():
    a = np.array([[4.0, 1.0], [1.0, 3.0]])
    x = xp.asarray(a)
    w, v = xp.linalg.eigh(x)
    assert xp.linalg.eigh(x)._fields == ("eigenvalues", "eigenvectors")
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(a))
    assert xp.linalg.svd(x)._fields == ("U", "S", "Vh") and xp.linalg.qr(x)._fields == ("Q", "R")
    assert xp.linalg.slogdet(x)._fields == ("sign", "logabsdet")
    np.testing.assert_allclose(np.asarray(xp.linalg.solve(x, xp.asarray([1.0, 2.0]))), np.linalg.solve(a, [1.0, 2.0]))
    assert x.__array_namespace__().linalg is xp.linalg


def test_qr_takes_the_standards_modes_only():
    with pytest.raises(ValueError, match="'reduced' or 'complete'"):
        xp.linalg.qr(xp.asarray(np.eye(2)), mode="r")
