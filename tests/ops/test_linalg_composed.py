"""lt.linalg's functions composed of lazy nodes (diagonal, trace, outer, cross, matrix_power,
matrix_rank, pinv, vector_norm, matrix_norm, norm) against np.linalg: values, dtypes and shapes
over odd and empty shapes, offsets, axes and orders; and np.linalg.* on tensors building them."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
dtypes = st.sampled_from([np.float32, np.float64])


def close(got, want, rtol=None):
    h = np.asarray(got)
    want = np.asarray(want)
    assert h.dtype == want.dtype and h.shape == want.shape, (h.dtype, want.dtype, h.shape, want.shape)
    if rtol is None:
        rtol = 1e-5 if want.dtype == np.float32 else 1e-12
    if want.dtype.kind == "f":
        np.testing.assert_allclose(h, want, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(h, want)


def normal(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


shapes = st.lists(st.integers(0, 4), min_size=2, max_size=4).map(tuple)


@SETTINGS
@given(shape=shapes, offset=st.integers(-5, 5), dtype=st.sampled_from([np.float32, np.int8, np.uint16, np.bool_]),
       seed=st.integers(0, 999))
def test_diagonal_and_trace(shape, offset, dtype, seed):
    a = (normal(shape, np.float64, seed) * 5).astype(dtype)
    t = lt.asarray(a)
    close(lt.linalg.diagonal(t, offset=offset), np.linalg.diagonal(a, offset=offset))
    close(lt.linalg.trace(t, offset=offset), np.linalg.trace(a, offset=offset))
    close(lt.linalg.trace(t * 2, offset=offset, dtype=np.float64), np.linalg.trace(a * 2, offset=offset, dtype=np.float64))
    # Of a transposed (strided) tensor, and of an expression.
    close(lt.linalg.diagonal(lt.swapaxes(t, -1, -2), offset=offset), np.linalg.diagonal(np.swapaxes(a, -1, -2), offset=offset))


@SETTINGS
@given(n=st.integers(0, 5), m=st.integers(0, 5), dtype=dtypes, seed=st.integers(0, 999))
def test_outer(n, m, dtype, seed):
    x, y = normal(n, dtype, seed), normal(m, np.float64, seed + 1)
    close(lt.linalg.outer(lt.asarray(x), lt.asarray(y)), np.linalg.outer(x, y))
    with pytest.raises(ValueError):
        lt.linalg.outer(lt.asarray(x.reshape(1, n)), lt.asarray(y))


@st.composite
def cross_shapes(draw):
    """Two shapes with 3 along `axis` (negative, or from the front of equal-rank operands) whose other
    axes broadcast."""
    batch = draw(st.lists(st.integers(0, 3), max_size=3))
    k = draw(st.integers(0, len(batch)))
    a = list(batch)
    a.insert(k, 3)
    b = [1 if draw(st.booleans()) else d for d in a]
    b[k] = 3
    axis = k - len(a) if draw(st.booleans()) else k
    return tuple(a), tuple(b), axis


@SETTINGS
@given(shapes=cross_shapes(), dtype=st.sampled_from([np.float32, np.float64, np.int32]), seed=st.integers(0, 999))
def test_cross(shapes, dtype, seed):
    a_shape, b_shape, axis = shapes
    a = (normal(a_shape, np.float64, seed) * 4).astype(dtype)
    b = (normal(b_shape, np.float64, seed + 1) * 4).astype(dtype)
    close(lt.linalg.cross(lt.asarray(a), lt.asarray(b), axis=axis), np.linalg.cross(a, b, axis=axis))


def test_cross_refuses_other_sizes():
    with pytest.raises(ValueError, match="3-dimensional vectors"):
        lt.linalg.cross(lt.ones(2), lt.ones(2))


@SETTINGS
@given(batch=st.lists(st.integers(0, 2), max_size=2).map(tuple), n=st.integers(0, 4), power=st.integers(-4, 9),
       dtype=st.sampled_from([np.float32, np.float64, np.int64]), seed=st.integers(0, 999))
def test_matrix_power(batch, n, power, dtype, seed):
    a = normal(batch + (n, n), np.float64, seed) + 2 * n * np.eye(n)
    a = (a / max(n, 1)).astype(dtype) if dtype != np.int64 else np.round(a).astype(dtype)
    if power < 0 and dtype == np.int64:
        a = np.eye(n, dtype=np.int64) * 2 + np.zeros(batch + (n, n), np.int64)
    close(lt.linalg.matrix_power(lt.asarray(a), power), np.linalg.matrix_power(a, power), rtol=1e-4 if dtype == np.float32 else 1e-10)


def test_matrix_power_refuses_non_integer_exponents():
    with pytest.raises(TypeError, match="exponent must be an integer"):
        lt.linalg.matrix_power(lt.asarray(np.eye(2)), 1.5)


@SETTINGS
@given(batch=st.lists(st.integers(0, 2), max_size=2).map(tuple), n=st.integers(1, 5), m=st.integers(1, 5),
       rank=st.integers(0, 5), dtype=dtypes, seed=st.integers(0, 999))
def test_matrix_rank_and_pinv_of_rank_deficient_matrices(batch, n, m, rank, dtype, seed):
    rank = min(rank, n, m)
    a = (normal(batch + (n, rank), np.float64, seed) @ normal(batch + (rank, m), np.float64, seed + 1)).astype(dtype)
    t = lt.asarray(a)
    close(lt.linalg.matrix_rank(t), np.linalg.matrix_rank(a))
    close(lt.linalg.matrix_rank(t, rtol=1e-3), np.linalg.matrix_rank(a, rtol=1e-3))
    close(lt.linalg.matrix_rank(t, tol=0.5), np.linalg.matrix_rank(a, tol=0.5))
    rtol = 1e-3 if dtype == np.float32 else 1e-8
    close(lt.linalg.pinv(t), np.linalg.pinv(a), rtol)
    close(lt.linalg.pinv(t, rtol=None), np.linalg.pinv(a, rtol=None), rtol)
    close(lt.linalg.pinv(t, rcond=1e-2), np.linalg.pinv(a, rcond=1e-2), rtol)


def test_matrix_rank_of_vectors_and_empty_pinv():
    close(lt.linalg.matrix_rank(lt.asarray(np.zeros(3))), np.int64(np.linalg.matrix_rank(np.zeros(3))))
    close(lt.linalg.matrix_rank(lt.asarray(np.ones(3))), np.int64(np.linalg.matrix_rank(np.ones(3))))
    close(lt.linalg.pinv(lt.zeros((2, 0, 3))), np.linalg.pinv(np.zeros((2, 0, 3))))
    with pytest.raises(ValueError, match="can't be both set"):
        lt.linalg.pinv(lt.asarray(np.eye(2)), rcond=0.1, rtol=0.1)


VECTOR_ORDS = [2, 1, 0, np.inf, -np.inf, 3, 0.5, -1, -2]


@SETTINGS
@given(shape=st.lists(st.integers(1, 4), max_size=3).map(tuple), ord=st.sampled_from(VECTOR_ORDS),
       keepdims=st.booleans(), dtype=st.sampled_from([np.float32, np.float64, np.int16]), data=st.data())
def test_vector_norm(shape, ord, keepdims, dtype, data):
    a = (normal(shape, np.float64, 7) * 3).astype(dtype)
    nd = len(shape)
    axis = data.draw(st.none() | st.integers(-nd, nd - 1) if nd else st.none())
    if nd >= 2 and data.draw(st.booleans()):
        axis = tuple(data.draw(st.permutations(range(nd)))[:data.draw(st.integers(1, nd))])
    rtol = 1e-5 if a.dtype == np.float32 else 1e-12
    close(lt.linalg.vector_norm(lt.asarray(a), axis=axis, keepdims=keepdims, ord=ord),
          np.linalg.vector_norm(a, axis=axis, keepdims=keepdims, ord=ord), rtol)


def test_vector_norm_of_empty_arrays():
    a = np.zeros((0, 3))
    for ord in (2, 1, 0, np.inf):
        close(lt.linalg.vector_norm(lt.asarray(a), axis=0, ord=ord), np.linalg.vector_norm(a, axis=0, ord=ord))


MATRIX_ORDS = ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]


@SETTINGS
@given(batch=st.lists(st.integers(1, 3), max_size=2).map(tuple), n=st.integers(1, 5), m=st.integers(1, 5),
       ord=st.sampled_from(MATRIX_ORDS), keepdims=st.booleans(), dtype=dtypes, seed=st.integers(0, 999))
def test_matrix_norm(batch, n, m, ord, keepdims, dtype, seed):
    a = normal(batch + (n, m), dtype, seed)
    close(lt.linalg.matrix_norm(lt.asarray(a), ord=ord, keepdims=keepdims),
          np.linalg.matrix_norm(a, ord=ord, keepdims=keepdims), 1e-5 if dtype == np.float32 else 1e-12)


@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple),
       ord=st.sampled_from([None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf, 3]), keepdims=st.booleans(),
       data=st.data())
def test_norm_follows_numpy_or_raises_as_it_does(shape, ord, keepdims, data):
    a = normal(shape, np.float64, 3)
    nd = len(shape)
    axis = data.draw(st.sampled_from([None] + list(range(-nd, nd)) + [(i, j) for i in range(nd) for j in range(nd)]))
    try:
        want = np.linalg.norm(a, ord=ord, axis=axis, keepdims=keepdims)
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e).split(":")[0][:20].replace("(", r"\(")):
            np.asarray(lt.linalg.norm(lt.asarray(a), ord=ord, axis=axis, keepdims=keepdims))
        return
    close(lt.linalg.norm(lt.asarray(a), ord=ord, axis=axis, keepdims=keepdims), want)


def test_norm_of_integers_is_float64():
    a = np.arange(-4, 5).reshape(3, 3)
    for ord in (None, 1, np.inf, "nuc"):
        close(lt.linalg.norm(lt.asarray(a), ord), np.linalg.norm(a, ord))


NUMPY_CALLS = [
    ("inv", lambda L, a: L.inv(a + 3 * np.eye(3))), ("det", lambda L, a: L.det(a)),
    ("svd", lambda L, a: L.svd(a, full_matrices=False)), ("norm", lambda L, a: L.norm(a, axis=-1)),
    ("eigh", lambda L, a: L.eigh(a + np.swapaxes(a, -1, -2))), ("trace", lambda L, a: L.trace(a, offset=1)),
    ("vector_norm", lambda L, a: L.vector_norm(a, ord=1)), ("pinv", lambda L, a: L.pinv(a)),
    ("matrix_rank", lambda L, a: L.matrix_rank(a)), ("solve", lambda L, a: L.solve(a + 3 * np.eye(3), a)),
    ("cross", lambda L, a: L.cross(a, a[::-1])), ("tensordot", lambda L, a: L.tensordot(a, a[0], axes=1)),
]


@pytest.mark.parametrize("name,call", NUMPY_CALLS, ids=[n for n, _ in NUMPY_CALLS])
def test_numpy_linalg_on_tensors_builds_lazy_results(name, call):
    a = normal((2, 3, 3), np.float64, 5)
    got = call(np.linalg, lt.asarray(a))
    want = call(np.linalg, a)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    assert type(got) is type(want) or isinstance(got, tuple)
    for g, w in zip(got, want):
        assert isinstance(g, (lt.Expr, lt.Tensor))
        close(g, w)


def test_numpy_linalg_functions_lazytensor_lacks_say_so():
    with pytest.raises(TypeError, match="no lazy counterpart"):
        np.linalg.lstsq(lt.asarray(np.eye(2)), lt.ones(2))
