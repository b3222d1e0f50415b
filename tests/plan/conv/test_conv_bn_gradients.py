"""The gradient rules of conv2d, its backward nodes and batch_norm (training and inference) against
central finite differences of float64 NumPy references, on hypothesis-drawn small shapes."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
import lazytensor.autodiff as autodiff
from lazytensor.autodiff.rules import GRADIENTS
from lazytensor.cbr.conv_reference import conv2d_nhwc_reference
from tests.support.conv_grad_reference import (batch_norm_reference, central_differences, conv_cases, dgrad_reference,
                                 wgrad_reference)

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
grad = getattr(autodiff, "grad", None)
needs_grad = pytest.mark.skipif(grad is None, reason="lazytensor.autodiff has no grad yet")


def values(*exprs):
    return [None if e is None else lt.evaluate(e).numpy() for e in exprs]


def assert_gradient(got, want, what, rtol=1e-6):
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(np.asarray(got, np.float64) - want).max())
    assert err <= rtol * scale, f"{what}: max |error| {err:.3g} against max |finite difference| {scale:.3g}"


def small_conv_case(draw_case):
    x_shape, w_shape, stride, padding, dilation, seed = draw_case
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    return x, w, stride, padding, dilation, rng


@SETTINGS
@given(conv_cases(max_hw=6, max_c=3))
def test_conv2d_rule_matches_finite_differences(case):
    x, w, stride, padding, dilation, rng = small_conv_case(case)
    kw = dict(stride=stride, padding=padding, dilation=dilation)
    node = lt.conv2d(lt.asarray(x), lt.asarray(w), **kw)
    g = rng.standard_normal(node.shape)
    dx, dw = GRADIENTS["conv2d"](node, lt.asarray(g))
    assert dx.op == "conv2d_backward_data" and dw.op == "conv2d_backward_filter"
    dx, dw = values(dx, dw)
    assert_gradient(dx, central_differences(lambda a: (conv2d_nhwc_reference(a, w, **kw) * g).sum(), x), "dx")
    assert_gradient(dw, central_differences(lambda a: (conv2d_nhwc_reference(x, a, **kw) * g).sum(), w), "dw")


@SETTINGS
@given(conv_cases(max_hw=6, max_c=3))
def test_backward_nodes_rules_match_finite_differences(case):
    # second derivatives: dgrad and wgrad are linear in each operand; their adjoints are conv2d and each other
    x, w, stride, padding, dilation, rng = small_conv_case(case)
    kw = dict(stride=stride, padding=padding, dilation=dilation)
    dy = rng.standard_normal(lt.conv2d(lt.asarray(x), lt.asarray(w), **kw).shape)
    dgrad = lt.conv2d_backward_data(lt.asarray(dy), lt.asarray(w), x.shape, **kw)
    gx = rng.standard_normal(x.shape)
    d_dy, d_w = values(*GRADIENTS["conv2d_backward_data"](dgrad, lt.asarray(gx)))
    assert_gradient(d_dy, central_differences(lambda a: (dgrad_reference(a, w, x.shape, **kw) * gx).sum(), dy), "dy")
    assert_gradient(d_w, central_differences(lambda a: (dgrad_reference(dy, a, x.shape, **kw) * gx).sum(), w), "w")
    wgrad = lt.conv2d_backward_filter(lt.asarray(x), lt.asarray(dy), w.shape, **kw)
    gw = rng.standard_normal(w.shape)
    d_x, d_dy = values(*GRADIENTS["conv2d_backward_filter"](wgrad, lt.asarray(gw)))
    assert_gradient(d_x, central_differences(lambda a: (wgrad_reference(a, dy, w.shape, **kw) * gw).sum(), x), "x")
    assert_gradient(d_dy, central_differences(lambda a: (wgrad_reference(x, a, w.shape, **kw) * gw).sum(), dy), "dy")


@st.composite
def bn_cases(draw):
    # NHWC only: each rank is a kernel structure of its own to compile, and the rule does not look at the rank
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=3, max_size=3))) + (draw(st.integers(1, 4)),)
    if np.prod(shape[:-1]) < 2:
        shape = (2,) + shape[1:]
    return shape, draw(st.booleans()), draw(st.sampled_from([1e-5, 0.1])), draw(st.integers(0, 2**32 - 1))


def bn_operands(shape, seed):
    rng = np.random.default_rng(seed)
    c = shape[-1]
    x = rng.standard_normal(shape) * rng.uniform(0.5, 3.0, c) + rng.uniform(-2, 2, c)
    gamma, beta = (rng.standard_normal(c).astype(np.float32) for _ in range(2))
    rm = rng.standard_normal(c).astype(np.float32)
    rv = rng.uniform(0.5, 2.0, c).astype(np.float32)
    return rng, x, gamma, beta, rm, rv


@SETTINGS
@given(bn_cases())
def test_batch_norm_rule_matches_finite_differences(case):
    shape, training, eps, seed = case
    rng, x, gamma, beta, rm, rv = bn_operands(shape, seed)
    running = lt.asarray(rm.copy()), lt.asarray(rv.copy())
    node = lt.batch_norm(lt.asarray(x), lt.asarray(gamma), lt.asarray(beta), *running, training=training, eps=eps)
    g = rng.standard_normal(shape)
    rules = GRADIENTS["batch_norm"](node, lt.asarray(g))
    assert rules[3] is None and rules[4] is None            # no gradient to the running statistics
    dx, dgamma, dbeta = values(*rules[:3])
    assert dx.dtype == np.float64 and dgamma.dtype == np.float32 and dbeta.dtype == np.float32

    def loss(x=x, gamma=gamma, beta=beta):
        return (batch_norm_reference(x, gamma, beta, rm, rv, training, eps) * g).sum()
    assert_gradient(dx, central_differences(lambda a: loss(x=a), x), "dx", rtol=1e-5)
    assert_gradient(dgamma, central_differences(lambda a: loss(gamma=a), gamma.astype(np.float64)), "dgamma", 1e-5)
    assert_gradient(dbeta, central_differences(lambda a: loss(beta=a), beta.astype(np.float64)), "dbeta", 1e-5)
    # the backward reads the running statistics (inference) but never writes them
    np.testing.assert_array_equal(running[0].numpy(), rm)
    np.testing.assert_array_equal(running[1].numpy(), rv)


def test_batch_norm_training_gradient_ignores_running_statistics_and_leaves_them():
    rng, x, gamma, beta, rm, rv = bn_operands((3, 4, 2, 5), 7)   # float64: the rule's kernels of the test above
    g = lt.asarray(rng.standard_normal(x.shape))
    results = []
    for running in ((rm, rv), (rm + 100.0, rv * 50.0)):
        rm_t, rv_t = lt.asarray(running[0].copy()), lt.asarray(running[1].copy())
        node = lt.batch_norm(lt.asarray(x), lt.asarray(gamma), lt.asarray(beta), rm_t, rv_t, training=True)
        grads = GRADIENTS["batch_norm"](node, g)[:3]       # built before the forward runs (and keeps its value)
        lt.evaluate(node)                                   # the forward updates the running statistics once
        after_forward = rm_t.numpy().copy(), rv_t.numpy().copy()
        results.append(values(*grads))
        np.testing.assert_array_equal(rm_t.numpy(), after_forward[0])
        np.testing.assert_array_equal(rv_t.numpy(), after_forward[1])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_batch_norm_backward_is_reductions_then_one_elementwise_kernel():
    rng, x, gamma, beta, rm, rv = bn_operands((4, 3, 3, 6), 2)
    x32 = lt.asarray(x.astype(np.float32))
    node = lt.batch_norm(x32, lt.asarray(gamma), lt.asarray(beta), lt.asarray(rm), lt.asarray(rv), training=True)
    dx = GRADIENTS["batch_norm"](node, lt.asarray(rng.standard_normal(x.shape).astype(np.float32)))[0]
    assert dx.dtype == np.float32
    steps = lt.explain(dx, source=False).steps
    kinds = [type(s).__name__ for s in steps]
    assert kinds[-1] == "FusedElementwise" and set(kinds[:-1]) == {"FusedReduction"}, kinds


@SETTINGS
@given(conv_cases(max_hw=5, max_c=3), st.booleans())
def test_conv_then_batch_norm_chain_matches_finite_differences(case, training):
    # the two rules chained by hand, as the reverse pass chains them: dgrad's dy is BN's dx expression
    x, w, stride, padding, dilation, rng = small_conv_case(case)
    kw = dict(stride=stride, padding=padding, dilation=dilation)
    conv = lt.conv2d(lt.asarray(x), lt.asarray(w), **kw)
    if np.prod(conv.shape[:-1]) < 2:
        return
    k = w.shape[0]
    gamma, beta = rng.standard_normal(k).astype(np.float32), rng.standard_normal(k).astype(np.float32)
    rm, rv = rng.standard_normal(k).astype(np.float32), rng.uniform(0.5, 2, k).astype(np.float32)
    bn = lt.batch_norm(conv, lt.asarray(gamma), lt.asarray(beta), lt.asarray(rm), lt.asarray(rv), training=training)
    g = rng.standard_normal(bn.shape)
    d_conv = GRADIENTS["batch_norm"](bn, lt.asarray(g))[0]
    dx, dw = values(*GRADIENTS["conv2d"](conv, d_conv))

    def loss(x=x, w=w):
        return (batch_norm_reference(conv2d_nhwc_reference(x, w, **kw), gamma, beta, rm, rv, training, 1e-5) * g).sum()
    assert_gradient(dx, central_differences(lambda a: loss(x=a), x), "dx", rtol=1e-5)
    assert_gradient(dw, central_differences(lambda a: loss(w=a), w), "dw", rtol=1e-5)


@needs_grad
@pytest.mark.parametrize("training", [True, False])
def test_lt_grad_through_conv_and_batch_norm(training):
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((2, 5, 5, 3)), rng.standard_normal((4, 3, 3, 3))
    gamma, beta = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    rm, rv = rng.standard_normal(4).astype(np.float32), rng.uniform(0.5, 2, 4).astype(np.float32)
    g = rng.standard_normal((2, 3, 3, 4))
    X, W, GA, BE = (lt.asarray(a) for a in (x, w, gamma, beta))
    rm_t, rv_t = lt.asarray(rm.copy()), lt.asarray(rv.copy())
    y = lt.batch_norm(lt.conv2d(X, W, stride=2, padding=1), GA, BE, rm_t, rv_t, training=training)
    got = values(*grad(lt.sum(y * lt.asarray(g)), [X, W, GA, BE]))

    def loss(x=x, w=w, gamma=gamma, beta=beta):
        conv = conv2d_nhwc_reference(x, w, 2, 1, 1)
        return (batch_norm_reference(conv, gamma, beta, rm, rv, training, 1e-5) * g).sum()
    for name, a, got_a in zip(("x", "w", "gamma", "beta"), (x, w, gamma, beta), got):
        want = central_differences(lambda v, name=name: loss(**{name: v}), np.asarray(a, np.float64))
        assert_gradient(got_a, want, name, rtol=1e-5)
    np.testing.assert_array_equal(rm_t.numpy(), rm)     # nothing evaluated the forward
    np.testing.assert_array_equal(rv_t.numpy(), rv)


@needs_grad
def test_lt_grad_plans_no_dgrad_when_x_is_not_an_input():
    # the first-layer rule: the data gets no gradient, so the plan has no conv2d_backward_data step
    rng = np.random.default_rng(12)
    X = lt.asarray(rng.standard_normal((2, 5, 5, 3)))
    W = lt.asarray(rng.standard_normal((4, 3, 3, 3)))
    loss = lt.sum(lt.conv2d(X, W, padding=1) * lt.asarray(rng.standard_normal((2, 5, 5, 4))))
    (dw,) = grad(loss, [W])
    text = lt.explain(dw, source=False)
    assert "wgrad" in text and "dgrad" not in text and "conv2d_backward_data" not in text


@needs_grad
def test_lt_grad_of_a_conv_with_bias():
    # the bias is an add above the conv node: the add rule and the sum over broadcast axes give its gradient
    rng = np.random.default_rng(13)
    x, w, b = rng.standard_normal((2, 6, 5, 3)), rng.standard_normal((4, 2, 3, 3)), rng.standard_normal(4)
    g = rng.standard_normal((2, 3, 2, 4))
    X, W, B = lt.asarray(x), lt.asarray(w), lt.asarray(b)
    loss = lt.sum(lt.conv2d(X, W, bias=B, stride=2, dilation=(1, 1)) * lt.asarray(g))
    got = values(*grad(loss, [X, W, B]))

    def f(x=x, w=w, b=b):
        return ((conv2d_nhwc_reference(x, w, 2, 0, 1) + b) * g).sum()
    for name, a, got_a in zip(("x", "w", "b"), (x, w, b), got):
        assert_gradient(got_a, central_differences(lambda v, name=name: f(**{name: v}), a), name)
