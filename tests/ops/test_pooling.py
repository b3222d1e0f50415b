"""max_pool2d and avg_pool2d on NHWC against plain loops with PyTorch's semantics (tests/support/oracles.py):
forward and the backward ops on hypothesis-drawn shapes, kernels, strides and paddings, float16/32/64,
-inf and NaN; the gradient rules against central finite differences in float64; errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
import lazytensor.autodiff
from lazytensor.autodiff.rules import GRADIENTS
from lazytensor.ops.pooling import pool_backward
from tests.support.oracles import finite_differences, out_size, pool_backward_reference, pool_reference

grad = getattr(lazytensor.autodiff, "grad", None) or getattr(lt, "grad", None)
needs_grad = pytest.mark.skipif(grad is None, reason="lt.grad (lazytensor.autodiff.reverse) has not landed yet")
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
POOL = {"max": lt.max_pool2d, "avg": lt.avg_pool2d}
TOL = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-12}


@st.composite
def pooling(draw, max_side=7):
    """(input shape, kernel, stride, padding) that PyTorch accepts: padding at most half the kernel,
    the kernel within the padded input."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    h = draw(st.integers(max(1, kernel[0] - 2 * padding[0]), max_side))
    w = draw(st.integers(max(1, kernel[1] - 2 * padding[1]), max_side))
    return (draw(st.integers(1, 2)), h, w, draw(st.integers(1, 3))), kernel, stride, padding


def _values(shape, dtype, rng, special):
    x = rng.standard_normal(shape)
    if special:     # ties, -inf (all -inf windows), NaN
        flat = x.reshape(-1)
        flat[rng.random(flat.size) < 0.2] = 0.5
        flat[rng.random(flat.size) < 0.15] = -np.inf
        flat[rng.random(flat.size) < 0.05] = np.nan
    return x.astype(dtype)


@SETTINGS
@given(pooling(), st.sampled_from(["max", "avg"]), st.sampled_from(["float16", "float32", "float64"]),
       st.booleans(), st.booleans(), st.integers(0, 2**16))
def test_pool_forward_matches_reference(geometry, kind, dtype, special, default_stride, seed):
    shape, kernel, stride, padding = geometry
    rng = np.random.default_rng(seed)
    x = _values(shape, dtype, rng, special)
    if default_stride:
        stride = kernel
        y = POOL[kind](lt.asarray(x, device="cpu"), kernel, padding=padding)
    else:
        y = POOL[kind](lt.asarray(x, device="cpu"), kernel, stride, padding)
    want = pool_reference(kind, x.astype(np.float64), kernel, stride, padding)
    ours = np.asarray(y)
    assert ours.dtype == x.dtype and ours.shape == want.shape
    tol = TOL[x.dtype]
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(ours.astype(np.float64), want, rtol=tol, atol=tol)


@SETTINGS
@given(pooling(), st.sampled_from(["max", "avg"]), st.sampled_from(["float16", "float32", "float64"]),
       st.booleans(), st.integers(0, 2**16))
def test_pool_backward_op_matches_reference(geometry, kind, dtype, special, seed):
    shape, kernel, stride, padding = geometry
    rng = np.random.default_rng(seed)
    x = _values(shape, dtype, rng, special)
    node = POOL[kind](lt.asarray(x, device="cpu"), kernel, stride, padding)
    g = rng.standard_normal(node.shape).astype(dtype)
    ours = np.asarray(pool_backward(node, lt.asarray(g, device="cpu")))
    want = pool_backward_reference(kind, x.astype(np.float64), g.astype(np.float64), kernel, stride, padding)
    assert ours.dtype == x.dtype and ours.shape == x.shape
    tol = 4 * TOL[x.dtype]
    np.testing.assert_allclose(ours.astype(np.float64), want, rtol=tol, atol=tol)


def test_max_pool_backward_breaks_ties_as_pytorch():
    # one window of 2 x 2: ties go to the first maximum (row by row), NaN to the last NaN
    x = np.array([[[[1.0], [3.0]], [[3.0], [2.0]]]])
    g = np.array([[[[5.0]]]])
    for values, want in (([1, 3, 3, 2], [0, 5, 0, 0]), ([np.nan, 3, np.nan, 2], [0, 0, 5, 0]),
                         ([-np.inf] * 4, [5, 0, 0, 0])):
        x = np.array(values, dtype=np.float64).reshape(1, 2, 2, 1)
        node = lt.max_pool2d(lt.asarray(x, device="cpu"), 2)
        dx = np.asarray(pool_backward(node, lt.asarray(g, device="cpu")))
        np.testing.assert_array_equal(dx.reshape(-1), want)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pooling(max_side=5), st.sampled_from(["max", "avg"]), st.integers(0, 2**16))
def test_pool_rules_match_finite_differences(geometry, kind, seed):
    shape, kernel, stride, padding = geometry
    rng = np.random.default_rng(seed)
    x = rng.permutation(np.prod(shape)).reshape(shape) * 0.1 + rng.random(shape) * 0.01   # no ties
    node = POOL[kind](lt.asarray(x, device="cpu"), kernel, stride, padding)
    w = rng.standard_normal(node.shape)
    (dx,) = GRADIENTS[node.op](node, lt.asarray(w, device="cpu"))
    loss = lambda x: float(np.sum(pool_reference(kind, x, kernel, stride, padding) * w))   # noqa: E731
    np.testing.assert_allclose(np.asarray(dx), finite_differences(loss, [x], 0, eps=1e-4), rtol=1e-6, atol=1e-8)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pooling(max_side=5), st.integers(0, 2**16))
def test_avg_pool_backward_rule_matches_finite_differences(geometry, seed):
    shape, kernel, stride, padding = geometry
    rng = np.random.default_rng(seed)
    x = lt.asarray(rng.standard_normal(shape), device="cpu")
    p, q = out_size(shape, kernel, stride, padding)
    g = rng.standard_normal((shape[0], p, q, shape[3]))
    node = pool_backward(lt.avg_pool2d(x, kernel, stride, padding), lt.asarray(g, device="cpu"))
    w = rng.standard_normal(shape)
    (dg,) = GRADIENTS[node.op](node, lt.asarray(w, device="cpu"))
    loss = lambda g: float(np.sum(pool_backward_reference("avg", x.numpy(), g, kernel, stride, padding) * w))  # noqa: E731
    np.testing.assert_allclose(np.asarray(dg), finite_differences(loss, [g], 0), rtol=1e-6, atol=1e-8)


def test_pool_of_expressions_and_views_and_global_average():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 6, 5, 3))
    t = lt.asarray(x, device="cpu")
    y = lt.max_pool2d(lt.relu(t[:, ::-1] * 2), 2)      # an expression operand is evaluated first
    np.testing.assert_allclose(np.asarray(y), pool_reference("max", np.maximum(x[:, ::-1] * 2, 0), (2, 2), (2, 2), (0, 0)))
    steps = lt.explain(lt.relu(lt.avg_pool2d(t, 3, 1, 1)) + 1).steps
    assert [type(s).__name__ for s in steps] == ["PoolStep", "FusedElementwise"]
    np.testing.assert_allclose(np.asarray(t.mean(axis=(1, 2))), x.mean(axis=(1, 2)))   # global average pooling


def test_pool_errors():
    t = lt.zeros((1, 4, 4, 2), device="cpu")
    with pytest.raises(ValueError, match="NHWC"):
        lt.max_pool2d(lt.zeros((4, 4, 2), device="cpu"), 2)
    with pytest.raises(ValueError, match="half the kernel"):
        lt.max_pool2d(t, 2, padding=2)
    with pytest.raises(ValueError, match="larger than the padded input"):
        lt.avg_pool2d(t, 5)
    with pytest.raises(TypeError, match="floating-point"):
        lt.max_pool2d(lt.zeros((1, 4, 4, 2), dtype=np.int32, device="cpu"), 2)
    with pytest.raises(TypeError, match="pair of ints"):
        lt.avg_pool2d(t, (2, 2, 2))
    with pytest.raises(ValueError, match="positive"):
        lt.avg_pool2d(t, 2, stride=0)


@needs_grad
def test_grad_through_pooling_matches_finite_differences():
    rng = np.random.default_rng(8)
    x = rng.permutation(2 * 5 * 6 * 2).reshape(2, 5, 6, 2) * 0.1
    w = rng.standard_normal((2, 3, 3, 2))
    tx, tw = lt.asarray(x, device="cpu"), lt.asarray(w, device="cpu")
    (gx,) = grad((lt.max_pool2d(tx, 3, 2, 1) * tw).sum(), [tx])
    loss = lambda x: float(np.sum(pool_reference("max", x, (3, 3), (2, 2), (1, 1)) * w))   # noqa: E731
    np.testing.assert_allclose(np.asarray(gx), finite_differences(loss, [x], 0, eps=1e-4), rtol=1e-6, atol=1e-8)


def test_pooling_as_the_root_writes_the_destination():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 6, 6, 3))
    t = lt.asarray(x, device="cpu")
    assert [type(s).__name__ for s in lt.explain(lt.avg_pool2d(t, 2)).steps] == ["PoolStep"]
    want = pool_reference("avg", x, (2, 2), (2, 2), (0, 0))
    y = lt.zeros((3, 3, 3, 2), dtype=np.float64, device="cpu")
    y[...] = lt.avg_pool2d(t, 2).transpose(2, 1, 3, 0)      # a strided destination
    np.testing.assert_allclose(y.numpy(), want.transpose(2, 1, 3, 0))
    t2 = lt.asarray(x.copy(), device="cpu")
    t2[:, :3, :3] = lt.max_pool2d(t2, 2)                      # reads its own destination: NumPy's result
    np.testing.assert_allclose(t2.numpy()[:, :3, :3], pool_reference("max", x, (2, 2), (2, 2), (0, 0)))


def test_a_recipe_rebinds_the_pooling_and_matmul_steps_to_new_tensors():
    rng = np.random.default_rng(10)
    for _ in range(3):      # the same structure each time: planned once, then rebound (lazytensor.reuse.recipes)
        x, w = rng.standard_normal((2, 4, 4, 3)), rng.standard_normal((3, 5))
        tx, tw = lt.asarray(x, device="cpu"), lt.asarray(w, device="cpu")
        g = rng.standard_normal((2, 2, 2, 3))
        e = lt.relu(lt.max_pool2d(tx, 2) @ tw) + 1
        np.testing.assert_allclose(np.asarray(e), np.maximum(pool_reference("max", x, (2, 2), (2, 2), (0, 0)) @ w, 0) + 1)
        d = pool_backward(lt.avg_pool2d(tx * 2, 2), lt.asarray(g, device="cpu")) * 3
        np.testing.assert_allclose(np.asarray(d), 3 * pool_backward_reference("avg", x, g, (2, 2), (2, 2), (0, 0)))
