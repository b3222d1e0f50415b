"""lt.linalg's decompositions (cholesky, inv, solve, det, slogdet, eigh, eigvalsh, qr, svd, svdvals)
against np.linalg: values, dtypes and shapes over stacks of odd sizes, empty stacks and 0 x 0
matrices, float32 and float64 (integers compute in float64), in both CPU tiers; NumPy's errors
(LinAlgError for too few dimensions, non-square, singular and non positive definite matrices)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt

SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}




stacks = st.tuples(st.lists(st.integers(0, 3), max_size=2).map(tuple), st.integers(0, 5), st.integers(0, 5))
dtypes = st.sampled_from([np.float32, np.float64])


def matrices(batch, n, m, dtype, seed, kind="general"):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (n, m))
    if kind == "spd":
        a = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    elif kind == "square":
        a = a + 2 * n * np.eye(n)             # well conditioned: float32 results stay close to NumPy's
    return a.astype(dtype)


def check(got, want):
    """got (lazy results, one or a tuple) has want's values, dtypes and shapes."""
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, lt.Expr) or isinstance(g, lt.Tensor)
        h = np.asarray(g)
        assert h.dtype == w.dtype and h.shape == w.shape
        np.testing.assert_allclose(h, w, rtol=TOL[w.dtype], atol=TOL[w.dtype])


CASES = {
    "cholesky": ("spd", lambda x: lt.linalg.cholesky(x), lambda x: np.linalg.cholesky(x)),
    "cholesky upper": ("spd", lambda x: lt.linalg.cholesky(x, upper=True), lambda x: np.linalg.cholesky(x, upper=True)),
    "inv": ("square", lt.linalg.inv, np.linalg.inv),
    "det": ("square", lt.linalg.det, np.linalg.det),
    "slogdet": ("square", lambda x: tuple(lt.linalg.slogdet(x)), lambda x: tuple(np.linalg.slogdet(x))),
    "eigh": ("spd", lambda x: tuple(lt.linalg.eigh(x)), lambda x: tuple(np.linalg.eigh(x))),
    "eigh U": ("spd", lambda x: tuple(lt.linalg.eigh(x, "U")), lambda x: tuple(np.linalg.eigh(x, "U"))),
    "eigvalsh": ("spd", lt.linalg.eigvalsh, np.linalg.eigvalsh),
    "svd hermitian": ("spd", lambda x: tuple(lt.linalg.svd(x, hermitian=True)),
                      lambda x: tuple(np.linalg.svd(x, hermitian=True))),
}
RECTANGULAR = {
    "qr": (lambda x: tuple(lt.linalg.qr(x)), lambda x: tuple(np.linalg.qr(x))),
    "qr complete": (lambda x: tuple(lt.linalg.qr(x, "complete")), lambda x: tuple(np.linalg.qr(x, "complete"))),
    "qr r": (lambda x: lt.linalg.qr(x, "r"), lambda x: np.linalg.qr(x, "r")),
    "qr raw": (lambda x: lt.linalg.qr(x, "raw"), lambda x: np.linalg.qr(x, "raw")),
    "svd": (lambda x: tuple(lt.linalg.svd(x)), lambda x: tuple(np.linalg.svd(x))),
    "svd reduced": (lambda x: tuple(lt.linalg.svd(x, full_matrices=False)),
                    lambda x: tuple(np.linalg.svd(x, full_matrices=False))),
    "svd values": (lambda x: lt.linalg.svd(x, compute_uv=False), lambda x: np.linalg.svd(x, compute_uv=False)),
    "svdvals": (lt.linalg.svdvals, np.linalg.svdvals),
}


@pytest.mark.parametrize("name", sorted(CASES))
@SETTINGS
@given(shape=stacks, dtype=dtypes, seed=st.integers(0, 2**16))
def test_square_functions_match_numpy(name, shape, dtype, seed):
    batch, n, _ = shape
    kind, ours, numpys = CASES[name]
    a = matrices(batch, n, n, dtype, seed, kind)
    check(ours(lt.asarray(a)), numpys(a))


@pytest.mark.parametrize("name", sorted(RECTANGULAR))
@SETTINGS
@given(shape=stacks, dtype=dtypes, seed=st.integers(0, 2**16))
def test_rectangular_functions_match_numpy(name, shape, dtype, seed):
    batch, n, m = shape
    ours, numpys = RECTANGULAR[name]
    a = matrices(batch, n, m, dtype, seed)
    check(ours(lt.asarray(a)), numpys(a))


@st.composite
def solve_shapes(draw):
    """(a's shape, b's shape): a stack of square matrices, b one vector or a stack of matrices whose
    batch broadcasts with a's (NumPy 2's rule)."""
    n = draw(st.integers(0, 4))
    a_batch = draw(st.lists(st.integers(0, 3), max_size=2).map(tuple))
    if draw(st.booleans()):
        return a_batch + (n, n), (n,)
    b_batch = tuple(1 if draw(st.booleans()) else d for d in a_batch)[draw(st.integers(0, len(a_batch))):]
    if b_batch and draw(st.booleans()):
        a_batch = tuple(1 if draw(st.booleans()) else d for d in a_batch)
    return a_batch + (n, n), b_batch + (n, draw(st.integers(0, 3)))


@SETTINGS
@given(shapes=solve_shapes(), dtypes=st.tuples(dtypes, dtypes), seed=st.integers(0, 2**16))
def test_solve_matches_numpy(shapes, dtypes, seed):
    a_shape, b_shape = shapes
    a = matrices(a_shape[:-2], a_shape[-1], a_shape[-1], dtypes[0], seed, "square")
    b = np.random.default_rng(seed + 1).standard_normal(b_shape).astype(dtypes[1])
    check(lt.linalg.solve(lt.asarray(a), lt.asarray(b)), np.linalg.solve(a, b))


def test_fused_operands_and_results_in_both_tiers(tier):
    """Elementwise work before and after a decomposition: its operand evaluated by one kernel, the
    results read by the next, NumPy's numbers in either tier."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 4, 4))
    s = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
    x = lt.asarray(s)
    w, v = lt.linalg.eigh(x * 2.0 + 1.0)
    got = np.asarray(lt.exp(-w)[..., None, :] * v + lt.linalg.inv(x + 1.0))
    nw, nv = np.linalg.eigh(s * 2.0 + 1.0)
    np.testing.assert_allclose(got, np.exp(-nw)[..., None, :] * nv + np.linalg.inv(s + 1.0), rtol=1e-12, atol=1e-12)
    y = lt.asarray(rng.standard_normal((2, 5, 3)))
    u, sv, vh = lt.linalg.svd(y, full_matrices=False)
    back = np.asarray((u * sv[..., None, :]) @ vh)
    np.testing.assert_allclose(back, np.asarray(y), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("src", [np.int64, np.int8, np.bool_])
def test_integers_and_bools_compute_in_float64(src):
    a = (np.triu(np.ones((3, 3))) + (src is not np.bool_) * np.eye(3)).astype(src)
    check(lt.linalg.inv(lt.asarray(a)), np.linalg.inv(a))
    check(lt.linalg.det(lt.asarray(a)), np.linalg.det(a))
    mixed = np.eye(3, dtype=np.float32) * 3
    check(lt.linalg.solve(lt.asarray(mixed), lt.asarray(a)), np.linalg.solve(mixed, a))


def test_float16_is_refused_as_numpy_refuses_it():
    a = np.eye(2, dtype=np.float16)
    with pytest.raises(TypeError) as numpys:
        np.linalg.inv(a)
    with pytest.raises(TypeError) as ours:
        lt.linalg.inv(lt.asarray(a))
    assert str(ours.value) == str(numpys.value)


FUNCTIONS = [("cholesky", ()), ("inv", ()), ("det", ()), ("slogdet", ()), ("eigh", ()), ("eigvalsh", ())]


@pytest.mark.parametrize("fn,args", FUNCTIONS)
@pytest.mark.parametrize("shape", [(3,), (), (2, 3), (4, 2, 3)])
def test_shapes_numpy_refuses_raise_linalgerror_at_the_call(fn, args, shape):
    a = np.ones(shape)
    with pytest.raises(np.linalg.LinAlgError) as numpys:
        getattr(np.linalg, fn)(a, *args)
    with pytest.raises(np.linalg.LinAlgError) as ours:
        getattr(lt.linalg, fn)(lt.asarray(a), *args)
    assert str(ours.value) == str(numpys.value)


@pytest.mark.parametrize("fn", ["qr", "svd", "svdvals"])
def test_vectors_raise_linalgerror_for_rectangular_functions(fn):
    with pytest.raises(np.linalg.LinAlgError):
        getattr(np.linalg, fn)(np.ones(3))
    with pytest.raises(np.linalg.LinAlgError):
        getattr(lt.linalg, fn)(lt.ones(3))


@pytest.mark.parametrize("fn", ["inv", "solve"])
def test_a_singular_matrix_raises_linalgerror_when_evaluated(fn):
    a = np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]]])
    args = (a,) if fn == "inv" else (a, np.ones((2, 1)))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        getattr(np.linalg, fn)(*args)
    e = getattr(lt.linalg, fn)(*(lt.asarray(x) for x in args))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        np.asarray(e)


def test_cholesky_of_an_indefinite_matrix_raises_linalgerror():
    a = np.array([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        np.linalg.cholesky(a)
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        np.asarray(lt.linalg.cholesky(lt.asarray(a)))


def test_singular_matrices_give_numpys_det_and_slogdet():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    check(lt.linalg.det(lt.asarray(a)), np.linalg.det(a))
    check(tuple(lt.linalg.slogdet(lt.asarray(a))), tuple(np.linalg.slogdet(a)))


def test_solve_refuses_what_numpy_refuses():
    a = np.eye(3)
    for b in (np.ones(4), np.ones((4, 2)), np.ones((2, 3, 1))[:, :2]):
        with pytest.raises(ValueError):
            np.linalg.solve(a, b)
        with pytest.raises(ValueError):
            lt.linalg.solve(lt.asarray(a), lt.asarray(b))
    with pytest.raises(ValueError):
        np.linalg.solve(np.ones((2, 3, 3)), np.ones((3, 3, 1)))
    with pytest.raises(ValueError):
        lt.linalg.solve(lt.ones((2, 3, 3)), lt.ones((3, 3, 1)))


def test_options_numpy_refuses():
    x = lt.asarray(np.eye(2))
    with pytest.raises(ValueError, match="Unrecognized mode"):
        lt.linalg.qr(x, "economy")
    with pytest.raises(ValueError, match="UPLO"):
        lt.linalg.eigh(x, "X")
    with pytest.raises(np.linalg.LinAlgError):
        lt.linalg.svd(lt.ones((2, 3)), hermitian=True)


def test_results_are_named_tuples_with_numpys_fields():
    x = lt.asarray(np.eye(3) * 2)
    for ours, numpys in ((lt.linalg.eigh(x), np.linalg.eigh(np.eye(3))), (lt.linalg.qr(x), np.linalg.qr(np.eye(3))),
                         (lt.linalg.slogdet(x), np.linalg.slogdet(np.eye(3))),
                         (lt.linalg.svd(x), np.linalg.svd(np.eye(3)))):
        assert ours._fields == numpys._fields
