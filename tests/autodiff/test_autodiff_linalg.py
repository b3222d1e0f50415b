"""Gradients of the linalg nodes (lazytensor.autodiff.rules_linalg) against central finite differences
of NumPy's functions in float64: inv, solve (matrices, vectors, broadcast batches), det, slogdet,
cholesky and eigh (of the triangle they read), eigvalsh, svd's factors and values (eigenvectors
and singular vectors with their signs fixed by their first row, as LAPACK may flip them); and the
composed functions through their parts (norms, trace, pinv). qr says it has no rule."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from tests.support.oracles import finite_differences

SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _spd(a):
    n = a.shape[-1]
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _square(a):
    return a + 2 * a.shape[-1] * np.eye(a.shape[-1])


# name: (prepare the input, lazy f, NumPy f); each f maps the input to an array weighted into a scalar.
CASES = {
    "inv": (_square, lt.linalg.inv, np.linalg.inv),
    "det": (_square, lt.linalg.det, np.linalg.det),
    "slogdet": (lambda a: a, lambda x: lt.linalg.slogdet(x).logabsdet, lambda x: np.linalg.slogdet(x).logabsdet),
    "slogdet sign": (lambda a: a, lambda x: lt.linalg.slogdet(x).sign * 1.0, lambda x: np.linalg.slogdet(x).sign),
    "cholesky": (_spd, lt.linalg.cholesky, np.linalg.cholesky),
    "cholesky upper": (_spd, lambda x: lt.linalg.cholesky(x, upper=True), lambda x: np.linalg.cholesky(x, upper=True)),
    "eigvalsh": (_spd, lt.linalg.eigvalsh, np.linalg.eigvalsh),
    "eigh values U": (_spd, lambda x: lt.linalg.eigh(x, "U").eigenvalues, lambda x: np.linalg.eigh(x, "U").eigenvalues),
    "svdvals": (lambda a: a, lt.linalg.svdvals, np.linalg.svdvals),
    "svd S": (lambda a: a, lambda x: lt.linalg.svd(x).S, lambda x: np.linalg.svd(x).S),
    "matrix_norm 2": (lambda a: a, lambda x: lt.linalg.matrix_norm(x, ord=2), lambda x: np.linalg.matrix_norm(x, ord=2)),
    "matrix_norm nuc": (lambda a: a, lambda x: lt.linalg.matrix_norm(x, ord="nuc"),
                        lambda x: np.linalg.matrix_norm(x, ord="nuc")),
    "vector_norm 3": (lambda a: a, lambda x: lt.linalg.vector_norm(x, ord=3, axis=-1),
                      lambda x: np.linalg.vector_norm(x, ord=3, axis=-1)),
    "trace": (lambda a: a, lambda x: lt.linalg.trace(x, offset=-1), lambda x: np.linalg.trace(x, offset=-1)),
    "pinv": (lambda a: a, lt.linalg.pinv, np.linalg.pinv),
    "eigh vectors": (lambda a: a + np.swapaxes(a, -1, -2), lambda x: _signed(lt, lt.linalg.eigh(x).eigenvectors),
                     lambda x: _signed(np, np.linalg.eigh(x).eigenvectors)),
    "eigh vectors U": (lambda a: a + np.swapaxes(a, -1, -2), lambda x: _signed(lt, lt.linalg.eigh(x, "U").eigenvectors),
                       lambda x: _signed(np, np.linalg.eigh(x, "U").eigenvectors)),
    "svd U": (lambda a: a, lambda x: _signed(lt, lt.linalg.svd(x).U), lambda x: _signed(np, np.linalg.svd(x).U)),
    "svd Vh": (lambda a: a, lambda x: _signed_rows(lt, lt.linalg.svd(x)), lambda x: _signed_rows(np, np.linalg.svd(x))),
}


def _signed(xp, v):
    """Columns with the sign that makes their first entry positive (the gradient of sign is zero)."""
    return v * xp.sign(v[..., :1, :])


def _signed_rows(xp, r):
    """Vh's rows with the signs of U's columns (they flip together)."""
    return r.Vh * xp.swapaxes(xp.sign(r.U[..., :1, :]), -1, -2)


@pytest.mark.parametrize("name", sorted(CASES))
@SETTINGS
@given(batch=st.lists(st.integers(1, 2), max_size=1).map(tuple), n=st.integers(1, 4), seed=st.integers(0, 999))
def test_gradient_matches_finite_differences(name, batch, n, seed):
    prepare, ours, numpys = CASES[name]
    rng = np.random.default_rng(seed)
    a = prepare(rng.standard_normal(batch + (n, n)))
    weight = rng.standard_normal(np.shape(numpys(a)))
    x = lt.asarray(a)
    got = np.asarray(lt.grad((ours(x) * weight).sum(), x))
    want = finite_differences(lambda m: float((numpys(m) * weight).sum()), [a], 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@SETTINGS
@given(vector=st.booleans(), a_batch=st.sampled_from([(), (2,), (1,)]), b_batch=st.sampled_from([(), (2,), (1,)]),
       n=st.integers(1, 3), seed=st.integers(0, 999))
def test_solve_gradients(vector, a_batch, b_batch, n, seed):
    rng = np.random.default_rng(seed)
    a = _square(rng.standard_normal(a_batch + (n, n)))
    b = rng.standard_normal((n,) if vector else b_batch + (n, 2))
    weight = rng.standard_normal(np.linalg.solve(a, b).shape)
    x, y = lt.asarray(a), lt.asarray(b)
    ga, gb = lt.grad((lt.linalg.solve(x, y) * weight).sum(), [x, y])
    f = lambda p, q: float((np.linalg.solve(p, q) * weight).sum())  # noqa: E731
    np.testing.assert_allclose(np.asarray(ga), finite_differences(f, [a, b], 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gb), finite_differences(f, [a, b], 1), rtol=1e-5, atol=1e-6)


@SETTINGS
@given(shape=st.sampled_from([(5, 3), (3, 5), (2, 3, 4), (2, 4, 2)]), seed=st.integers(0, 999))
def test_reduced_singular_vectors_of_rectangular_matrices(shape, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    r = np.linalg.svd(a, full_matrices=False)
    wu, wv = rng.standard_normal(r.U.shape), rng.standard_normal(r.Vh.shape)
    x = lt.asarray(a)

    def loss(xp, r):
        return (_signed(xp, r.U) * wu).sum() + (_signed_rows(xp, r) * wv).sum()
    got = np.asarray(lt.grad(loss(lt, lt.linalg.svd(x, full_matrices=False)), x))
    want = finite_differences(lambda m: float(loss(np, np.linalg.svd(m, full_matrices=False))), [a], 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("build,what", [
    (lambda x: lt.linalg.qr(x).R, "linalg.qr;"), (lambda x: lt.linalg.qr(x).Q, "linalg.qr;"),
    (lambda x: lt.linalg.svd(x[:2]).U, "linalg.svd's U with full_matrices=True of a 2 x 3 matrix"),
    (lambda x: lt.linalg.svd(x[:2]).Vh, "linalg.svd's Vh with full_matrices=True of a 2 x 3 matrix"),
])
def test_factors_without_a_rule_say_so(build, what):
    x = lt.asarray(np.eye(3) * 2)
    with pytest.raises(NotImplementedError, match=f"no gradient rule for {what}"):
        lt.grad(build(x).sum(), x)
