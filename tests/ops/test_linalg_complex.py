"""lt.linalg and xp.linalg over complex64 and complex128 against np.linalg: the decompositions (their
real results, eigenvalues, singular values and logabsdet, of the real dtype of that precision), the
composed functions (pinv conjugating as NumPy does, the norms real), vecdot conjugating its first
operand, np.linalg.* on tensors; odd shapes, batches, empty stacks and 0 x 0 matrices, both CPU
tiers; NumPy's dtypes for mixed operands and its errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
import lazytensor.array_api as xp

SETTINGS = settings(max_examples=10, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TOL = {np.dtype(np.float32): 3e-5, np.dtype(np.float64): 1e-12}
dtypes = st.sampled_from([np.complex64, np.complex128])
stacks = st.tuples(st.lists(st.integers(0, 3), max_size=2).map(tuple), st.integers(0, 5), st.integers(0, 5))




def matrices(shape, dtype, seed, kind="general"):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    n = shape[-1]
    if kind == "hermitian":        # positive definite, so cholesky and eigh apply
        a = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)
    elif kind == "square":         # well conditioned: complex64 results stay close to NumPy's
        a = a + 2 * n * np.eye(n)
    return a.astype(dtype)


def check(got, want):
    """got (lazy results, one or a tuple) has want's values, dtypes and shapes."""
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, (lt.Expr, lt.Tensor))
        h, w = np.asarray(g), np.asarray(w)
        assert h.dtype == w.dtype and h.shape == w.shape, (h.dtype, w.dtype, h.shape, w.shape)
        tol = TOL[np.dtype(w.dtype.type(0).real.dtype)] if w.dtype.kind in "fc" else 0
        np.testing.assert_allclose(h, w, rtol=tol, atol=tol * max(1.0, np.abs(w).max(initial=0)))


SQUARE = {
    "cholesky": ("hermitian", lambda m, x: m.cholesky(x)),
    "cholesky upper": ("hermitian", lambda m, x: m.cholesky(x, upper=True)),
    "inv": ("square", lambda m, x: m.inv(x)),
    "det": ("square", lambda m, x: m.det(x)),
    "slogdet": ("square", lambda m, x: tuple(m.slogdet(x))),
    "eigh": ("hermitian", lambda m, x: tuple(m.eigh(x))),
    "eigh U": ("hermitian", lambda m, x: tuple(m.eigh(x, "U"))),
    "eigvalsh": ("hermitian", lambda m, x: m.eigvalsh(x)),
    "svd hermitian": ("hermitian", lambda m, x: tuple(m.svd(x, hermitian=True))),
    "svdvals hermitian": ("hermitian", lambda m, x: m.svd(x, compute_uv=False, hermitian=True)),
    "pinv hermitian": ("hermitian", lambda m, x: m.pinv(x, hermitian=True)),
    "matrix_power 0": ("square", lambda m, x: m.matrix_power(x, 0)),
    "matrix_power 5": ("square", lambda m, x: m.matrix_power(x / 4, 5)),
    "matrix_power -2": ("square", lambda m, x: m.matrix_power(x, -2)),
    "trace": ("square", lambda m, x: m.trace(x, offset=1)),
    "diagonal": ("square", lambda m, x: m.diagonal(x, offset=-1)),
}
RECTANGULAR = {
    "qr": lambda m, x: tuple(m.qr(x)),
    "qr complete": lambda m, x: tuple(m.qr(x, "complete")),
    "qr r": lambda m, x: m.qr(x, "r"),
    "qr raw": lambda m, x: tuple(m.qr(x, "raw")),
    "svd": lambda m, x: tuple(m.svd(x)),
    "svd reduced": lambda m, x: tuple(m.svd(x, full_matrices=False)),
    "svdvals": lambda m, x: m.svdvals(x),
    "pinv": lambda m, x: m.pinv(x),
    "pinv rtol": lambda m, x: m.pinv(x, rtol=0.3),
    "matrix_rank": lambda m, x: m.matrix_rank(x),
    "matrix_transpose": lambda m, x: m.matrix_transpose(x),
    **{f"matrix_norm {o}": (lambda o: lambda m, x: m.matrix_norm(x, ord=o))(o)
       for o in ("fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)},
    "vector_norm": lambda m, x: m.vector_norm(x),
    **{f"vector_norm {o}": (lambda o: lambda m, x: m.vector_norm(x, axis=-1, ord=o))(o)
       for o in (1, 2, 3, 0, np.inf, -np.inf, -1)},
    "norm": lambda m, x: m.norm(x),
    "norm keepdims": lambda m, x: m.norm(x, axis=(-2, -1), keepdims=True),
}
# -1, -inf and -2 of an empty axis (or a zero) divide by zero as NumPy's own loops do.
_QUIET = dict(divide="ignore", invalid="ignore")


@pytest.mark.parametrize("name", sorted(SQUARE))
@SETTINGS
@given(shape=stacks, dtype=dtypes, seed=st.integers(0, 2**16))
def test_square_functions_match_numpy(name, shape, dtype, seed, tier):
    batch, n, _ = shape
    kind, fn = SQUARE[name]
    a = matrices(batch + (n, n), dtype, seed, kind)
    check(fn(lt.linalg, lt.asarray(a)), fn(np.linalg, a))


@pytest.mark.parametrize("name", sorted(RECTANGULAR))
@SETTINGS
@given(shape=stacks, dtype=dtypes, seed=st.integers(0, 2**16))
def test_rectangular_functions_match_numpy(name, shape, dtype, seed, tier):
    batch, n, m = shape
    fn = RECTANGULAR[name]
    a = matrices(batch + (n, m), dtype, seed)
    with np.errstate(**_QUIET):
        try:
            want = fn(np.linalg, a)
        except ValueError:         # NumPy refuses it (the max of an empty axis): so must we
            with pytest.raises(ValueError):
                np.asarray(fn(lt.linalg, lt.asarray(a)))
            return
        check(fn(lt.linalg, lt.asarray(a)), want)


@SETTINGS
@given(n=st.integers(0, 4), batch=st.lists(st.integers(0, 3), max_size=2).map(tuple), k=st.integers(0, 3),
       vector=st.booleans(), kinds=st.tuples(st.sampled_from([np.complex64, np.complex128, np.float32, np.float64]),
                                             dtypes), seed=st.integers(0, 2**16))
def test_solve_matches_numpy(n, batch, k, vector, kinds, seed, tier):
    a_dtype, b_dtype = kinds if seed % 2 else kinds[::-1]
    a = matrices(batch + (n, n), np.complex128, seed, "square")
    a = a.astype(a_dtype) if np.dtype(a_dtype).kind == "c" else a.real.astype(a_dtype)
    b = matrices((n,) if vector else batch + (n, k), b_dtype, seed + 1)
    b = b if np.dtype(b_dtype).kind == "c" else b.real.astype(b_dtype)
    check(lt.linalg.solve(lt.asarray(a), lt.asarray(b)), np.linalg.solve(a, b))


@SETTINGS
@given(shape=st.tuples(st.lists(st.integers(1, 3), max_size=2).map(tuple), st.integers(0, 6)),
       dtype=dtypes, seed=st.integers(0, 2**16))
def test_products_conjugate_as_the_standard_says(shape, dtype, seed, tier):
    batch, n = shape
    a, b = matrices(batch + (n,), dtype, seed), matrices((n,), dtype, seed + 1)
    x, y = xp.asarray(a), xp.asarray(b)
    check(xp.linalg.vecdot(x, y), np.linalg.vecdot(a, b))       # sum(conj(a) * b)
    check(xp.vecdot(y, x), np.vecdot(b, a))
    check(xp.linalg.outer(y, y), np.linalg.outer(b, b))
    check(xp.linalg.tensordot(x, y, axes=1), np.linalg.tensordot(a, b, axes=1))
    c, d = matrices(batch + (3,), dtype, seed + 2), matrices((3,), dtype, seed + 3)
    check(xp.linalg.cross(xp.asarray(c), xp.asarray(d)), np.linalg.cross(c, d))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_array_api_functions_give_numpys_dtypes(dtype, tier):
    """The results the standard says are real (eigvalsh, svdvals, logabsdet, the norms) are of the
    real dtype of the operand's precision; slogdet's sign is complex."""
    a = matrices((2, 3, 3), dtype, 7, "hermitian")
    x = xp.asarray(a)
    real = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
    for ours, numpys in ((xp.linalg.eigvalsh(x), np.linalg.eigvalsh(a)), (xp.linalg.svdvals(x), np.linalg.svdvals(a)),
                         (xp.linalg.vector_norm(x), np.linalg.vector_norm(a)),
                         (xp.linalg.matrix_norm(x), np.linalg.matrix_norm(a))):
        assert ours.dtype == real
        check(ours, numpys)
    sign, logabsdet = xp.linalg.slogdet(x)
    assert sign.dtype == np.dtype(dtype) and logabsdet.dtype == real
    check((sign, logabsdet), tuple(np.linalg.slogdet(a)))
    check(tuple(xp.linalg.eigh(x)), tuple(np.linalg.eigh(a)))
    check(xp.linalg.pinv(x), np.linalg.pinv(a, rtol=None))
    check(tuple(xp.linalg.qr(x, mode="complete")), tuple(np.linalg.qr(a, mode="complete")))


def test_numpys_functions_on_tensors_build_lazy_nodes():
    """np.linalg.* on a complex tensor reaches lt.linalg (__array_function__), NumPy's results."""
    a = matrices((2, 4, 4), np.complex128, 3, "hermitian")
    x = lt.asarray(a)
    for fn in (np.linalg.inv, np.linalg.det, np.linalg.cholesky, np.linalg.eigvalsh, np.linalg.pinv,
               np.linalg.svdvals, np.linalg.matrix_rank, np.linalg.norm, np.linalg.matrix_norm):
        got = fn(x)
        assert isinstance(got, (lt.Expr, lt.Tensor)), fn
        check(got, fn(a))
    for fn in (np.linalg.eigh, np.linalg.svd, np.linalg.slogdet, np.linalg.qr):
        got = fn(x)
        assert all(isinstance(g, (lt.Expr, lt.Tensor)) for g in got), fn
        check(tuple(got), tuple(fn(a)))


def test_mixed_operands_take_numpys_common_type():
    for d1, d2 in [(np.complex64, np.float32), (np.complex64, np.float64), (np.complex64, np.int64),
                   (np.float32, np.complex128), (np.complex64, np.complex128), (np.bool_, np.complex64)]:
        a, b = np.eye(2, dtype=d1) * (1 + (d1 is not np.bool_)), np.ones((2, 1), dtype=d2)
        check(lt.linalg.solve(lt.asarray(a), lt.asarray(b)), np.linalg.solve(a, b))


def test_errors_are_numpys():
    sq = np.array([[1, 2j], [2j, -4]], dtype=np.complex128)      # singular: det = -4 + 4 = 0
    for fn in ("inv",):
        with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
            getattr(np.linalg, fn)(sq)
        with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
            np.asarray(getattr(lt.linalg, fn)(lt.asarray(sq)))
    indefinite = np.array([[1, 2j], [-2j, 1]], dtype=np.complex64)
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        np.asarray(lt.linalg.cholesky(lt.asarray(indefinite)))
    with pytest.raises(np.linalg.LinAlgError) as numpys:
        np.linalg.det(np.ones((2, 3), np.complex64))
    with pytest.raises(np.linalg.LinAlgError) as ours:
        lt.linalg.det(lt.ones((2, 3), dtype=np.complex64))
    assert str(ours.value) == str(numpys.value)
    check(tuple(lt.linalg.slogdet(lt.asarray(sq))), tuple(np.linalg.slogdet(sq)))     # sign 0, -inf


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_the_rank_of_empty_matrices_is_zero_as_numpys(dtype):
    for shape in [(0, 0), (2, 0), (0, 3), (2, 0, 0)]:
        a = np.zeros(shape, dtype)
        check(lt.linalg.matrix_rank(lt.asarray(a)), np.linalg.matrix_rank(a))


@SETTINGS
@given(shape=stacks, dtype=st.sampled_from([np.float32, np.float64, np.complex64, np.complex128]),
       seed=st.integers(0, 2**16))
def test_eig_and_eigvals_are_numpys_always_complex(shape, dtype, seed, tier):
    """The standard's eig: NumPy's values, of the complex dtype of the operand's precision even where
    NumPy's are real (a symmetric matrix's)."""
    batch, n, _ = shape
    a = matrices(batch + (n, n), np.complex128, seed)
    a = a.astype(dtype) if np.dtype(dtype).kind == "c" else a.real.astype(dtype)
    if seed % 3 == 0:
        a = a + np.swapaxes(a, -1, -2).conj()        # real eigenvalues: NumPy's are real for a real a
    cplx = np.complex64 if dtype in (np.float32, np.complex64) else np.complex128
    w, v = np.linalg.eig(a)
    check(tuple(xp.linalg.eig(xp.asarray(a))), (w.astype(cplx), v.astype(cplx)))
    check(xp.linalg.eigvals(xp.asarray(a)), np.linalg.eigvals(a).astype(cplx))
    assert xp.linalg.eig(xp.asarray(a))._fields == ("eigenvalues", "eigenvectors")


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_results_of_one_call_read_together_keep_their_dtypes(dtype, tier):
    """One call writes every result (real eigenvalues and complex eigenvectors) into arrays of each
    one's dtype, whichever result the plan stands for."""
    a = matrices((2, 4, 4), dtype, 5, "hermitian")
    x = lt.asarray(a)
    w, v = lt.linalg.eigh(x)
    nw, nv = np.linalg.eigh(a)
    check(lt.evaluate(w, v), (nw, nv))
    check(w[..., None, :] * v, nw[..., None, :] * nv)
    check((v * w[..., None, :]) @ lt.conj(lt.swapaxes(v, -1, -2)), (nv * nw[..., None, :]) @ np.conj(np.swapaxes(nv, -1, -2)))
    u, s, vh = lt.linalg.svd(x)
    check(lt.evaluate(s, u, vh), tuple(np.linalg.svd(a))[1:2] + (np.linalg.svd(a).U, np.linalg.svd(a).Vh))
    sign, logabsdet = lt.linalg.slogdet(x)
    check(sign * lt.exp(logabsdet), np.linalg.det(a))
