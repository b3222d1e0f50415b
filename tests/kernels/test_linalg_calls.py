"""kernels/linalg.py's calls through an array module other than NumPy, a stand-in with CuPy's
signatures (cholesky without `upper`, svd without `hermitian`, solve reading a b of one dimension
less than a as vectors, NumPy 1's rule): what runs on CUDA gives np.linalg's results."""
from __future__ import annotations

import types

import numpy as np
import pytest

from lazytensor.kernels.linalg import _call


def _numpy1_solve(a, b):
    if b.ndim == a.ndim - 1:
        return np.linalg.solve(a, b[..., None])[..., 0]
    assert b.ndim == a.ndim, "CuPy's solve takes b of a's rank or one less"
    return np.linalg.solve(a, b)


class StandIn(types.ModuleType):
    """NumPy's functions under another module, with CuPy's linalg signatures."""

    def __init__(self):
        super().__init__("cupy_stand_in")
        self.linalg = types.SimpleNamespace(
            cholesky=lambda a: np.linalg.cholesky(a), inv=np.linalg.inv, det=np.linalg.det, slogdet=np.linalg.slogdet,
            eigh=lambda a, UPLO="L": np.linalg.eigh(a, UPLO), eigvalsh=lambda a, UPLO="L": np.linalg.eigvalsh(a, UPLO),
            qr=lambda a, mode="reduced": np.linalg.qr(a, mode),
            svd=lambda a, full_matrices=True, compute_uv=True: np.linalg.svd(a, full_matrices, compute_uv),
            solve=_numpy1_solve)

    def __getattr__(self, name):
        return getattr(np, name)


XP = StandIn()


def _spd(shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


@pytest.mark.parametrize("fn,params,want", [
    ("cholesky", (False,), lambda a: np.linalg.cholesky(a)),
    ("cholesky", (True,), lambda a: np.linalg.cholesky(a, upper=True)),
    ("svd", (False, True), lambda a: tuple(np.linalg.svd(a, hermitian=True))),
    ("svd", (True, False), lambda a: tuple(np.linalg.svd(a))),
    ("svdvals", (True,), lambda a: np.linalg.svd(a, compute_uv=False, hermitian=True)),
    ("eigh", ("U",), lambda a: tuple(np.linalg.eigh(a, "U"))),
    ("qr", ("r",), lambda a: np.linalg.qr(a, "r")),
])
def test_the_other_module_path_gives_numpys_results(fn, params, want):
    a = _spd((3, 4, 4)) - 3 * np.eye(4)             # indefinite for hermitian svd, still symmetric
    if fn == "cholesky":
        a = _spd((3, 4, 4)) + np.triu(np.ones((4, 4)), 1)      # not symmetric: which triangle is read matters
    got = _call(XP, fn, params, [a])
    expected = want(a)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(got) == len(expected)
    for g, w in zip(got, expected):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("a_shape,b_shape", [((3, 3), (3,)), ((2, 3, 3), (3,)), ((2, 3, 3), (3, 2)),
                                             ((1, 3, 3), (4, 3, 1)), ((2, 1, 3, 3), (5, 3, 2))])
def test_solve_broadcasts_as_numpy_2_does(a_shape, b_shape):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(a_shape) + 3 * np.eye(3)
    b = rng.standard_normal(b_shape)
    (got,) = _call(XP, "solve", (len(b_shape) == 1,), [a, b])
    np.testing.assert_allclose(got, np.linalg.solve(a, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fn,params,shapes,want", [
    ("svd", (True, False), [(2, 0, 3)], lambda a: tuple(np.linalg.svd(a))),
    ("det", (), [(3, 0, 0)], lambda a: np.linalg.det(a)),
    ("slogdet", (), [(2, 3, 3)], lambda a: tuple(np.linalg.slogdet(a))),
    ("cholesky", (True,), [(2, 3, 3)], lambda a: np.linalg.cholesky(a, upper=True)),
])
def test_run_linalg_off_the_host(monkeypatch, fn, params, shapes, want):
    """The CUDA branch of run_linalg with the stand-in as CuPy: failures asked to raise, empty stacks
    computed by NumPy and copied over, every result written into its output."""
    import contextlib
    from lazytensor.kernels.linalg import run_linalg
    asked = []
    monkeypatch.setitem(__import__("sys").modules, "cupy", XP)
    monkeypatch.setitem(__import__("sys").modules, "cupyx", types.SimpleNamespace(
        errstate=lambda **kw: asked.append(kw) or contextlib.nullcontext()))
    backend = types.SimpleNamespace(host_memory=False, name="cuda", asarray=np.asarray)
    inputs = [_spd(s) if 0 not in s else np.empty(s) for s in shapes]
    expected = want(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    outs = [np.full(w.shape, np.nan) for w in expected]
    run_linalg(backend, fn, params, inputs, outs)
    for o, w in zip(outs, expected):
        np.testing.assert_allclose(o, w, rtol=1e-12, atol=1e-12)
    assert asked == ([] if any(a.size == 0 for a in inputs) else [{"linalg": "raise"}])


def _hermitian(shape, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])


@pytest.mark.parametrize("fn,params,want", [
    ("cholesky", (True,), lambda a: np.linalg.cholesky(a, upper=True)),
    ("svd", (False, True), lambda a: tuple(np.linalg.svd(a, hermitian=True))),
    ("svdvals", (True,), lambda a: np.linalg.svd(a, compute_uv=False, hermitian=True)),
    ("eigh", ("U",), lambda a: tuple(np.linalg.eigh(a, "U"))),
    ("slogdet", (), lambda a: tuple(np.linalg.slogdet(a))),
    ("qr", ("complete",), lambda a: tuple(np.linalg.qr(a, "complete"))),
])
def test_the_other_module_path_gives_numpys_complex_results(fn, params, want):
    """Complex Hermitian matrices (indefinite for the hermitian svd: signs moved into a conjugated Vh)."""
    a = _hermitian((3, 4, 4)) - (4 * np.eye(4) if fn in ("svd", "svdvals") else 0)
    if fn == "cholesky":       # the upper triangle read alone: the lower one is not the mirror
        a = np.triu(a) + np.tril(np.ones((4, 4)) * (1 + 2j), -1)
    got = _call(XP, fn, params, [a])
    expected = want(a)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(got) == len(expected)
    for g, w in zip(got, expected):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("has_eig", [True, False])
@pytest.mark.parametrize("fn", ["eig", "eigvals"])
def test_eig_through_the_other_module_with_or_without_its_eig(fn, has_eig):
    """A CuPy without eig (before cuSOLVER's Xgeev) computes on the host: NumPy's results either way."""
    xp = StandIn()
    xp.asnumpy = np.asarray
    if has_eig:
        xp.linalg.eig, xp.linalg.eigvals = np.linalg.eig, np.linalg.eigvals
    a = np.random.default_rng(4).standard_normal((2, 5, 5))
    got = _call(xp, fn, (), [a])
    expected = tuple(np.linalg.eig(a)) if fn == "eig" else (np.linalg.eigvals(a),)
    assert len(got) == len(expected)
    for g, w in zip(got, expected):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
