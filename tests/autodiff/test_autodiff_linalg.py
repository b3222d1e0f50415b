"""Gradients of the linalg nodes (lazytensor.autodiff.rules_linalg) against central finite differences
of NumPy's functions in float64: inv, solve (matrices, vectors, broadcast batches), det, slogdet,
cholesky and eigh (of the triangle they read), eigvalsh, singular values; and the composed
functions through their parts (norms, trace). The other factors say they have no rule."""
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
}


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


@pytest.mark.parametrize("build,what", [
    (lambda x: lt.linalg.qr(x).R, "linalg.qr"), (lambda x: lt.linalg.eigh(x).eigenvectors, "linalg.eigh (its eigenvectors)"),
    (lambda x: lt.linalg.svd(x).U, "linalg.svd (its U)"), (lambda x: lt.linalg.svd(x).Vh, "linalg.svd (its Vh)"),
    (lambda x: lt.linalg.pinv(x), "linalg.svd (its U)"),
])
def test_factors_without_a_rule_say_so(build, what):
    x = lt.asarray(np.eye(3) * 2)
    with pytest.raises(NotImplementedError, match=f"no gradient rule for {what.replace('(', '[(]').replace(')', '[)]')}"):
        lt.grad(build(x).sum(), x)
