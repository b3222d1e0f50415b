"""lt.grad through the linalg nodes of complex matrices, PyTorch's convention (the gradient of a real
loss with respect to z = x + iy is dL/dx + i dL/dy), against central finite differences of NumPy's
functions in complex128, over the real and the imaginary part of each element separately: inv,
solve (complex and mixed real/complex operands: a real operand gets a real gradient), det, slogdet
(its sign has a phase), cholesky and eigh (of the triangle they read, the diagonal's real part),
eigvalsh, svd's factors and values, and the composed functions. Losses of eigenvectors and singular
vectors do not depend on their phases (as PyTorch requires). Batches (empty ones too), 1 x 1
matrices, complex64 with a looser tolerance, both CPU tiers; and svd(hermitian=True), which reads
the lower triangle, of real and complex matrices."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from tests.support.autodiff_oracle import complex_finite_differences

SETTINGS = settings(max_examples=6, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.filter_too_much])






def _h(a):
    return np.conj(np.swapaxes(a, -1, -2))


def _square(z):
    return z + 2 * z.shape[-1] * np.eye(z.shape[-1])


def _hpd(z):
    """A Hermitian positive definite matrix, its diagonal's imaginary part and upper triangle left as
    they come (cholesky and eigh read one triangle and the diagonal's real part)."""
    n = z.shape[-1]
    h = z @ _h(z) + n * np.eye(n)
    return np.tril(h) + np.triu(z, 1) + 1j * np.imag(np.diagonal(z, 0, -2, -1))[..., None] * np.eye(n)


def _hermitian(z):
    return z + _h(z)


def _phase_free(xp, v):
    """Each column times the conjugate of its first entry: free of the phase a column is defined up to."""
    return v * xp.conj(v[..., :1, :])


def _phase_free_rows(xp, r):
    return r.Vh * xp.conj(r.Vh[..., :, :1])


def _pairs(xp, r):
    """u_ik vh_k0: each is turned by svd's phases, the product by neither."""
    return r.U * xp.swapaxes(r.Vh[..., :, :1], -1, -2)


# name: (prepare the input, f for lt and for NumPy as f(xp, x)); the output is weighted into a real loss.
CASES = {
    "inv": (_square, lambda xp, x: xp.linalg.inv(x)),
    "det": (_square, lambda xp, x: xp.linalg.det(x)),
    "slogdet": (lambda z: z, lambda xp, x: xp.linalg.slogdet(x).logabsdet),
    "slogdet sign": (lambda z: z, lambda xp, x: xp.linalg.slogdet(x).sign),
    "cholesky": (_hpd, lambda xp, x: xp.linalg.cholesky(x)),
    "cholesky upper": (lambda z: _h(_hpd(z)), lambda xp, x: xp.linalg.cholesky(x, upper=True)),
    "eigvalsh": (_hpd, lambda xp, x: xp.linalg.eigvalsh(x)),
    "eigvalsh U": (lambda z: _h(_hpd(z)), lambda xp, x: xp.linalg.eigvalsh(x, "U")),
    "eigh values": (_hpd, lambda xp, x: xp.linalg.eigh(x).eigenvalues),
    "eigh vectors": (_hermitian, lambda xp, x: _phase_free(xp, xp.linalg.eigh(x).eigenvectors)),
    "eigh vectors U": (lambda z: _h(_hpd(z)), lambda xp, x: _phase_free(xp, xp.linalg.eigh(x, "U").eigenvectors)),
    "eigh abs vectors": (_hpd, lambda xp, x: xp.abs(xp.linalg.eigh(x).eigenvectors)),
    "svdvals": (lambda z: z, lambda xp, x: xp.linalg.svdvals(x)),
    "svd S": (lambda z: z, lambda xp, x: xp.linalg.svd(x).S),
    "svd U": (lambda z: z, lambda xp, x: _phase_free(xp, xp.linalg.svd(x).U)),
    "svd Vh": (lambda z: z, lambda xp, x: _phase_free_rows(xp, xp.linalg.svd(x))),
    "svd U with Vh": (lambda z: z, lambda xp, x: _pairs(xp, xp.linalg.svd(x))),
    "svd product": (lambda z: z, lambda xp, x: (lambda r: (r.U * r.S[..., None, :]) @ r.Vh)(xp.linalg.svd(x))),
    "matrix_norm fro": (lambda z: z, lambda xp, x: xp.linalg.matrix_norm(x)),
    "matrix_norm 2": (lambda z: z, lambda xp, x: xp.linalg.matrix_norm(x, ord=2)),
    "matrix_norm nuc": (lambda z: z, lambda xp, x: xp.linalg.matrix_norm(x, ord="nuc")),
    "vector_norm": (lambda z: z, lambda xp, x: xp.linalg.vector_norm(x, axis=-1)),
    "trace": (lambda z: z, lambda xp, x: xp.linalg.trace(x)),
    "pinv": (lambda z: z, lambda xp, x: xp.linalg.pinv(x)),
}

# Distinct (eigen or singular) values, away from zero, for the factors whose gradients divide by gaps.
GAPPED = {"eigh vectors": "eigvalsh", "eigh vectors U": "eigvalsh", "eigh abs vectors": "eigvalsh",
          "svd U": "svdvals", "svd Vh": "svdvals", "svd U with Vh": "svdvals", "svd product": "svdvals",
          "svdvals": "svdvals", "svd S": "svdvals", "matrix_norm 2": "svdvals", "matrix_norm nuc": "svdvals",
          "pinv": "svdvals"}


def _well_separated(name, a):
    which = GAPPED.get(name)
    if which is None:
        return True
    w = np.linalg.svdvals(a) if which == "svdvals" else np.linalg.eigvalsh(a, "U" if name.endswith(" U") else "L")
    w = np.sort(w, axis=-1)
    return np.all(np.diff(w, axis=-1) > 0.3) and (which == "eigvalsh" or np.all(w > 0.3))


def _random(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _loss_weights(rng, out):
    return _random(rng, out.shape) if np.iscomplexobj(out) else rng.standard_normal(out.shape)


def _check(name, a, rng, rtol, atol):
    prepare, f = CASES[name]
    weight = _loss_weights(rng, f(np, a.astype(np.complex128)))
    x = lt.asarray(a)
    got = lt.grad(lt.real(f(lt, x) * weight).sum(), x)
    assert got.dtype == a.dtype and got.shape == a.shape
    want = complex_finite_differences(lambda m: float(np.real(f(np, m) * weight).sum()), a.astype(np.complex128))
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", sorted(CASES))
@SETTINGS
@given(batch=st.sampled_from([(), (1,), (2,), (0,)]), n=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_gradient_matches_complex_finite_differences(name, batch, n, seed, tier):
    rng = np.random.default_rng(seed)
    a = CASES[name][0](_random(rng, batch + (n, n)))
    assume(_well_separated(name, a))
    _check(name, a, rng, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
@settings(SETTINGS, max_examples=3)
@given(batch=st.sampled_from([(), (2,)]), n=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_complex64_gradients(name, batch, n, seed):
    rng = np.random.default_rng(seed)
    a = CASES[name][0](_random(rng, batch + (n, n))).astype(np.complex64)
    assume(_well_separated(name, a.astype(np.complex128)))
    _check(name, a, rng, rtol=2e-3, atol=2e-3)


@SETTINGS
@given(shape=st.sampled_from([(3, 2), (2, 3), (2, 4, 2), (1, 3)]), seed=st.integers(0, 2**16))
def test_reduced_singular_vectors_of_rectangular_matrices(shape, seed, tier):
    rng = np.random.default_rng(seed)
    a = _random(rng, shape)
    assume(_well_separated("svd U", a))
    wu, wv, wp = (_random(rng, s) for s in ((*shape[:-1], min(shape[-2:])), (*shape[:-2], min(shape[-2:]),
                                                                              shape[-1]), shape[:-1] + (1,)))

    def loss(xp, r):
        return xp.real((_phase_free(xp, r.U) * wu).sum() + (_phase_free_rows(xp, r) * wv).sum()
                       + (_pairs(xp, r)[..., :1] * wp).sum())
    x = lt.asarray(a)
    got = lt.grad(loss(lt, lt.linalg.svd(x, full_matrices=False)), x)
    want = complex_finite_differences(lambda m: float(loss(np, np.linalg.svd(m, full_matrices=False))), a)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


@SETTINGS
@given(vector=st.booleans(), kinds=st.sampled_from(["cc", "rc", "cr"]), a_batch=st.sampled_from([(), (2,), (1,)]),
       b_batch=st.sampled_from([(), (2,), (1,)]), n=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_solve_gradients(vector, kinds, a_batch, b_batch, n, seed, tier):
    rng = np.random.default_rng(seed)
    a = _square(_random(rng, a_batch + (n, n)))
    b = _random(rng, (n,) if vector else b_batch + (n, 2))
    a, b = (a if kinds[0] == "c" else a.real.copy()), (b if kinds[1] == "c" else b.real.copy())
    weight = _random(rng, np.linalg.solve(a, b).shape)
    x, y = lt.asarray(a), lt.asarray(b)
    ga, gb = lt.grad(lt.real(lt.linalg.solve(x, y) * weight).sum(), [x, y])
    assert (ga.dtype, gb.dtype) == (a.dtype, b.dtype)
    np.testing.assert_allclose(np.asarray(ga), complex_finite_differences(
        lambda p: float(np.real(np.linalg.solve(p, b) * weight).sum()), a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gb), complex_finite_differences(
        lambda q: float(np.real(np.linalg.solve(a, q) * weight).sum()), b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@SETTINGS
@given(batch=st.sampled_from([(), (2,)]), n=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_hermitian_svd_reads_the_lower_triangle(dtype, batch, n, seed, tier):
    """svd(hermitian=True) decomposes what eigh reads: the gradient is that of the lower triangle."""
    rng = np.random.default_rng(seed)
    z = _random(rng, batch + (n, n)).astype(dtype) if dtype == np.complex128 else rng.standard_normal(batch + (n, n))
    a = np.tril(_hermitian(z)) + np.triu(z, 1)
    assume(_well_separated("svd U", np.tril(a) + np.conj(np.swapaxes(np.tril(a, -1), -1, -2))))
    weight = rng.standard_normal(batch + (n,))

    def loss(xp, x):
        r = xp.linalg.svd(x, hermitian=True)
        return xp.real((r.S * weight).sum() + (_pairs(xp, r) * weight[..., None, :]).sum()
                       + (xp.linalg.svdvals(x, hermitian=True) if xp is lt else np.linalg.svd(x, compute_uv=False,
                                                                                              hermitian=True)).sum())
    x = lt.asarray(a)
    got = lt.grad(loss(lt, x), x)
    want = complex_finite_differences(lambda m: float(loss(np, m)), a)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_factors_without_a_rule_say_so():
    x = lt.asarray(np.eye(3) * (2 + 1j))
    with pytest.raises(NotImplementedError, match="no gradient rule for linalg.qr;"):
        lt.grad(lt.real(lt.linalg.qr(x).R).sum(), x)
    with pytest.raises(NotImplementedError, match="linalg.svd's U with full_matrices=True of a 2 x 3 matrix"):
        lt.grad(lt.abs(lt.linalg.svd(x[:2]).U).sum(), x)


@pytest.mark.parametrize("name", ["cholesky", "cholesky upper", "eigvalsh", "eigvalsh U", "eigh vectors U"])
@SETTINGS
@given(n=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_what_is_not_read_has_no_gradient(name, n, seed):
    """The triangle not read, and the diagonal's imaginary part, get exact zeros."""
    prepare, f = CASES[name]
    rng = np.random.default_rng(seed)
    a = prepare(_random(rng, (n, n)))
    out = f(np, a)
    x = lt.asarray(a)
    got = np.asarray(lt.grad(lt.real(f(lt, x) * _loss_weights(rng, out)).sum(), x))
    unread = np.tril(got, -1) if name.endswith("U") or name.endswith("upper") else np.triu(got, 1)
    assert not unread.any() and not np.diagonal(got).imag.any()
