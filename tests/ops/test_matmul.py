"""lt.matmul and `a @ b` against np.matmul (shapes, 1-D operands, broadcast batches, dtypes, errors),
the plan (one matmul step, the elementwise work after it fused into one kernel), and the gradient
rule against central finite differences in float64 (directly, and through lt.grad once it exists)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import lazytensor as lt
import lazytensor.autodiff
from lazytensor.autodiff.rules import GRADIENTS
from tests.support.oracles import finite_differences

grad = getattr(lazytensor.autodiff, "grad", None) or getattr(lt, "grad", None)
needs_grad = pytest.mark.skipif(grad is None, reason="lt.grad (lazytensor.autodiff.reverse) has not landed yet")
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def matmul_shapes(draw, max_core=5):
    """Operand shapes np.matmul accepts: 1-D or more, batch axes that broadcast (unit axes, missing
    leading axes), core sizes including 1 and 0."""
    n, k, m = (draw(st.integers(0 if i == 1 else 1, max_core)) for i in range(3))
    a_nd, b_nd = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    nb = max(a_nd, b_nd, 2) - 2
    batch = draw(st.lists(st.integers(1, 3), min_size=nb, max_size=nb))

    def batch_of(nd):
        axes = batch[len(batch) - max(nd - 2, 0):] if nd > 2 else []
        return tuple(1 if draw(st.booleans()) else d for d in axes)
    a = batch_of(a_nd) + ((n, k) if a_nd > 1 else (k,))
    b = batch_of(b_nd) + ((k, m) if b_nd > 1 else (k,))
    return a, b


def _array(shape, dtype, rng):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(-4 if dtype.kind == "i" else 0, 5, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _check(ours, want):
    ours = np.asarray(ours)
    assert ours.dtype == want.dtype and ours.shape == want.shape
    if want.dtype.kind == "f":
        tol = {2: 2e-3, 4: 1e-5, 8: 1e-12}[want.dtype.itemsize]
        np.testing.assert_allclose(ours, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(ours, want)


@SETTINGS
@given(matmul_shapes(), st.sampled_from(["float32", "float64", ("float32", "float64"), ("int32", "float32")]),
       st.integers(0, 2**16))
def test_matmul_matches_numpy(shapes, dtypes, seed):
    rng = np.random.default_rng(seed)
    da, db = dtypes if isinstance(dtypes, tuple) else (dtypes, dtypes)
    a, b = _array(shapes[0], da, rng), _array(shapes[1], db, rng)
    ta, tb = lt.asarray(a, device="cpu"), lt.asarray(b, device="cpu")
    want = np.matmul(a, b)
    _check(lt.matmul(ta, tb), want)
    _check(ta @ tb, want)


@pytest.mark.parametrize("dtype", ["float16", "int8", "int64", "uint8", "bool"])
def test_matmul_dtypes(dtype):
    rng = np.random.default_rng(1)
    a, b = _array((2, 3, 4), dtype, rng), _array((4, 5), dtype, rng)
    _check(lt.asarray(a, device="cpu") @ lt.asarray(b, device="cpu"), np.matmul(a, b))


def test_matmul_special_values_and_views():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 3))
    a[0, 1], a[2, 0], a[3, 2] = np.nan, np.inf, -np.inf
    w = rng.standard_normal((5, 3))
    ta, tw = lt.asarray(a, device="cpu"), lt.asarray(w, device="cpu")
    with np.errstate(invalid="ignore"):
        _check(ta @ tw.T, a @ w.T)                       # a transposed view, passed to BLAS as it is
        _check((ta * 2) @ tw[:, ::-1].T, (a * 2) @ w[:, ::-1].T)   # an expression operand: evaluated first


def test_ndarray_operands_and_numpy_spelling():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    tb = lt.asarray(b, device="cpu")
    for e in (a @ tb, np.matmul(a, tb), lt.matmul(a, tb)):
        assert isinstance(e, lt.Expr)
        _check(e, a @ b)


def test_matmul_errors_name_the_shapes():
    t = lambda *s: lt.zeros(s, device="cpu")   # noqa: E731
    with pytest.raises(ValueError, match=r"mismatch in its core dimension 0.*size 5 is different from 4"):
        t(3, 4) @ t(5, 2)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        t(2, 3, 4) @ t(3, 4, 5)
    with pytest.raises(ValueError, match="does not have enough dimensions"):
        lt.matmul(t(3), lt.asarray(np.float32(2.0).reshape(()), device="cpu"))
    with pytest.raises(TypeError, match="takes no scalars"):
        t(3, 4) @ 2.0
    for a_shape, b_shape in (((3, 4), (5, 2)), ((2, 3, 4), (3, 4, 5)), ((3,), (4,))):
        with pytest.raises(ValueError):
            np.matmul(np.zeros(a_shape), np.zeros(b_shape))     # NumPy refuses the same shapes


def test_relu_of_affine_is_a_matmul_then_one_kernel():
    rng = np.random.default_rng(4)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((6, 4), (4, 3), (3,)))
    tx, tw, tb = (lt.asarray(v, device="cpu") for v in (x, w, b))
    e = lt.relu(tx @ tw + tb)
    steps = lt.explain(e).steps
    assert [type(s).__name__ for s in steps] == ["MatmulStep", "FusedElementwise"]
    assert "no cuBLASLt epilogue" in lt.explain(e, source=False).__str__()
    with lt.profile() as p:
        out = lt.evaluate(e)
    assert [k.kind for k in p.kernels] == ["matmul", "elementwise"]
    _check(out, np.maximum(x @ w + b, 0))


def test_matmul_writes_the_destination_and_strided_destinations():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    ta, tb = lt.asarray(a, device="cpu"), lt.asarray(b, device="cpu")
    y = lt.zeros((3, 5), dtype=np.float64, device="cpu")
    y[...] = ta @ tb
    _check(y, a @ b)
    z = lt.zeros((5, 3), dtype=np.float64, device="cpu")
    z.T[...] = ta @ tb
    _check(z, (a @ b).T)
    sq = lt.asarray(rng.standard_normal((4, 4)), device="cpu")
    before = sq.numpy().copy()
    sq[...] = sq @ sq                                   # reads its destination: NumPy's result all the same
    _check(sq, before @ before)


# -- gradients ------------------------------------------------------------------------------------

def _rule_gradients(a, b, w):
    ta, tb = lt.asarray(a, device="cpu"), lt.asarray(b, device="cpu")
    node = lt.matmul(ta, tb)
    assert node.op == "matmul" and node.args == (ta, tb)
    return [np.asarray(g) for g in GRADIENTS["matmul"](node, lt.asarray(w, device="cpu"))]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(matmul_shapes(max_core=3), st.integers(0, 2**16))
@example(((2, 1, 3, 2), (3, 2, 4)), 0)       # a's unit batch axis and missing leading axis broadcast
@example(((4, 3, 2), (1, 2, 5)), 0)          # b's unit batch axis
@example(((3,), (2, 3, 4)), 0)               # a vector against a batch
@example(((2, 2, 3), (3,)), 0)
def test_matmul_rule_matches_finite_differences(shapes, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    w = rng.standard_normal(np.matmul(a, b).shape)
    da, db = _rule_gradients(a, b, w)
    loss = lambda a, b: float(np.sum(np.matmul(a, b) * w))   # noqa: E731
    assert da.shape == a.shape and db.shape == b.shape
    np.testing.assert_allclose(da, finite_differences(loss, [a, b], 0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(db, finite_differences(loss, [a, b], 1), rtol=1e-6, atol=1e-7)


def test_matmul_rule_gives_no_gradient_to_integer_operands():
    i = lt.asarray(np.arange(6, dtype=np.int32).reshape(2, 3), device="cpu")
    ints = lt.matmul(i, i.T)
    assert GRADIENTS["matmul"](ints, lt.ones((2, 2), dtype=np.int32, device="cpu")) == (None, None)
    mixed = lt.matmul(i, lt.asarray(np.ones((3, 2)), device="cpu"))
    assert mixed.args[0].op == "astype"      # the rule sees a's float64 cast: the cast's own rule stops it


@needs_grad
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(matmul_shapes(max_core=3), st.integers(0, 2**16))
def test_grad_of_matmul_matches_finite_differences(shapes, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    w = rng.standard_normal(np.matmul(a, b).shape)
    ta, tb, tw = (lt.asarray(v, device="cpu") for v in (a, b, w))
    ga, gb = grad(((ta @ tb) * tw).sum(), [ta, tb])
    loss = lambda a, b: float(np.sum(np.matmul(a, b) * w))   # noqa: E731
    np.testing.assert_allclose(np.asarray(ga), finite_differences(loss, [a, b], 0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(gb), finite_differences(loss, [a, b], 1), rtol=1e-6, atol=1e-7)


def test_numpy_matmul_with_out_assigns():
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    y = lt.zeros((3, 2), dtype=np.float64, device="cpu")
    assert np.matmul(lt.asarray(a, device="cpu"), b, out=(y,)) is y
    _check(y, a @ b)
