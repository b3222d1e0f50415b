"""lt.grad as a whole: random DAGs against finite differences, the backward fusing like any
expression (one kernel per elementwise gradient, the update fused into it, broadcast sums in one
reduction step), the first-layer rule, several uses of an input, float16/float32, explain_grad,
and the errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

import lazytensor as lt
from tests.support.autodiff_oracle import assert_gradients_match, finite_difference, numpy_value
from lazytensor.testing import dags
from lazytensor.core.tensor import Tensor

F64 = (np.dtype(np.float64),)


def _rand(shape, seed=0, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def _leaves(root) -> list:
    out, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Tensor):
            out.append(node)
        elif hasattr(node, "args"):
            stack.extend(node.args)
    return out


# -- random DAGs --------------------------------------------------------------------------------

@settings(max_examples=12, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(dags(dtypes=F64, scalar_dtypes=F64, max_ops=6))
def test_random_dag_gradient_matches_finite_differences(dag):
    """d sum(DAG * w) / d leaf for DAGs of float64 ops (every op of the table, clip, where, shared
    subexpressions, broadcasting, strided leaves). The drawn leaves hold special values (NaN, inf,
    huge) for the forward tests; here they get smooth random values instead, written into their
    memory before anything is evaluated."""
    leaves = _leaves(dag.expr)
    for k, t in enumerate(leaves):
        t.data[...] = _rand(t.shape, seed=k, lo=-2.0, hi=2.0)
    value = numpy_value(dag.expr)
    assume(np.all(np.isfinite(value)))
    w = _rand(value.shape, seed=99)
    loss = lt.sum(dag.expr * lt.asarray(w))
    grads = lt.grad(loss, leaves)
    got = [g.numpy() for g in grads]
    expected = finite_difference(dag.expr, leaves, w)
    assert_gradients_match(got, expected, rtol=1e-4, atol=1e-5, context=repr(dag))


# -- fusion -------------------------------------------------------------------------------------

def _issue_example(shape=(1000,), dtype=np.float32):
    arrays = [_rand(shape, seed=s).astype(dtype) for s in range(4)]
    a, b, c, d = (lt.asarray(x) for x in arrays)
    return arrays, (a, b, c, d), lt.sum(lt.tanh(a * b + c) * d)


def test_each_elementwise_gradient_is_one_kernel_and_the_update_adds_none():
    (an, bn, cn, dn), tensors, loss = _issue_example()
    grads = lt.grad(loss, tensors)
    t = np.tanh(an * bn + cn)
    s = (1 - t * t) * dn
    expected = [s * bn, s * an, s, t]
    for g, want in zip(grads, expected):
        assert len(lt.explain(g).steps) == 1
        with lt.profile() as p:
            got = lt.evaluate(g)
        assert p.launches == 1 and p.kernels[0].kind == "elementwise"
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-6, atol=1e-6)
    a = tensors[0]
    before = a.numpy().copy()
    ga = lt.grad(loss, a)         # afresh: the gradients above were evaluated, and keep their values
    update = a - 0.1 * ga
    text = lt.explain(update)
    assert "plan: 1 step" in text and "tanh" in text      # the backward ops and the update, one kernel
    del update, loss, grads       # held, they would be evaluated before `a` is written (values stay values)
    with lt.profile() as p:
        a[...] -= 0.1 * ga
    assert p.launches == 1
    np.testing.assert_allclose(a.numpy(), before - 0.1 * expected[0], rtol=2e-6, atol=1e-6)


def test_broadcast_gradient_is_one_reduction_step_with_the_backward_fused_into_it():
    xn, wn, bn = _rand((64, 8), 1), _rand((8,), 2), _rand((8,), 3)
    x, w, bias = lt.asarray(xn), lt.asarray(wn), lt.asarray(bn)
    loss = lt.sum(lt.tanh(x * w + bias) ** 2)
    g_bias = lt.grad(loss, bias)
    steps = lt.explain(g_bias).steps
    assert [type(s).__name__ for s in steps] == ["FusedReduction"]
    t = np.tanh(xn * wn + bn)
    want = bn - 0.5 * (2 * t * (1 - t * t)).sum(0)      # before the update, which writes bn's memory
    del loss                     # held, it would be evaluated before `bias` is written (values stay values)
    with lt.profile() as p:
        bias[...] -= 0.5 * g_bias
    assert p.launches == 2                       # the reduction (with the backward in it), the update
    np.testing.assert_allclose(bias.numpy(), want, rtol=1e-12)


def test_an_input_used_several_times_gets_the_sum_in_one_kernel():
    an = _rand((5, 6), 4)
    a = lt.asarray(an)
    g = lt.grad(lt.sum(a * a + lt.sin(a) * 3.0 - a), a)
    assert len(lt.explain(g).steps) == 1
    np.testing.assert_allclose(g.numpy(), 2 * an + 3 * np.cos(an) - 1, rtol=1e-12)


def test_tensors_not_in_inputs_get_no_gradient_work():
    """The first-layer rule: the data's gradient would need a scatter (x[::2]); none is planned."""
    x, w = lt.asarray(_rand((8, 5), 5)), lt.asarray(_rand((5,), 6))
    loss = lt.sum(lt.tanh(x[::2] * w))
    gradients = lt.grad(loss, [w])
    steps = lt.explain(gradients[0]).steps
    assert [type(s).__name__ for s in steps] == ["FusedReduction"]
    assert x in gradients.untouched
    text = lt.explain_grad(loss, [w])
    assert "not differentiated: the base of t0" in text and "nothing is built" in text
    assert "scatter" not in text


def test_explain_grad_says_where_no_gradient_flows():
    x = lt.asarray(_rand((6,), 7))
    loss = lt.sum(lt.where(x > 0, lt.floor(x * 3) + x, x * 2))
    text = lt.explain_grad(loss, x)
    assert "floor is piecewise constant" in text
    assert "bool values" in text                 # where's condition
    np.testing.assert_allclose(lt.grad(loss, x).numpy(), np.where(x.numpy() > 0, 1.0, 2.0))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_lower_precision_gradients_keep_their_dtype(dtype):
    xn = _rand((4, 7), 8).astype(dtype)
    x = lt.asarray(xn)
    s = lt.asarray(_rand((7,), 9).astype(dtype))
    g, gs = lt.grad(lt.mean(lt.sigmoid(x * s) * x), [x, s])
    assert g.dtype == dtype and gs.dtype == dtype
    x64, s64 = xn.astype(np.float64), s.numpy().astype(np.float64)
    sig = 1 / (1 + np.exp(-x64 * s64))
    want = (sig * (1 - sig) * s64 * x64 + sig) / xn.size
    want_s = (sig * (1 - sig) * x64 * x64).sum(0) / xn.size
    tol = 5e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(g.numpy().astype(np.float64), want, rtol=tol, atol=tol * 0.1)
    np.testing.assert_allclose(gs.numpy().astype(np.float64), want_s, rtol=tol, atol=tol * 0.1)


def test_a_single_tensor_gives_a_single_gradient_and_grad_output_is_a_vjp():
    xn, vn = _rand((3, 4), 10), _rand((3, 4), 11)
    x = lt.asarray(xn)
    g = lt.grad(lt.exp(x), x, grad_output=vn)
    assert isinstance(g, lt.Expr)
    np.testing.assert_allclose(g.numpy(), vn * np.exp(xn))
    (g2,) = lt.grad(lt.exp(x), [x], grad_output=lt.asarray(vn))
    np.testing.assert_allclose(g2.numpy(), vn * np.exp(xn))


def test_an_input_reached_only_through_ops_without_gradient_gets_zeros():
    x = lt.asarray(_rand((5,), 12))
    gradients = lt.grad(lt.sum((x > 0).astype(np.float64) + lt.sign(x)), [x])
    np.testing.assert_array_equal(gradients[0].numpy(), np.zeros(5))
    assert len(gradients.stops) == 2


# -- bad input ------------------------------------------------------------------------------------

def test_errors():
    x = lt.asarray(_rand((3, 4), 13))
    other = lt.asarray(_rand((3, 4), 14))
    with pytest.raises(TypeError, match="int64.*no gradient"):
        lt.grad(lt.sum(x.astype(np.int32)), x)
    with pytest.raises(TypeError, match="bool"):
        lt.grad(lt.any(x > 0), x)
    with pytest.raises(ValueError, match=r"shape \(3, 4\).*scalar output.*grad_output"):
        lt.grad(x * 2.0, x)
    with pytest.raises(ValueError, match=r"does not read inputs\[1\]"):
        lt.grad(lt.sum(x * 2.0), [x, other])
    with pytest.raises(TypeError, match=r"inputs\[0\] is an expression"):
        lt.grad(lt.sum(x * 2.0), [x * 1.0])
    with pytest.raises(TypeError, match=r"inputs\[0\] is a int64 Tensor"):
        lt.grad(lt.sum(x * 2.0), [lt.asarray(np.arange(3))])
    with pytest.raises(ValueError, match=r"grad_output has shape \(4,\) but the output has shape \(3, 4\)"):
        lt.grad(x * 2.0, x, grad_output=np.ones(4))
    with pytest.raises(ValueError, match="inputs is empty"):
        lt.grad(lt.sum(x), [])


def test_gradient_through_an_evaluated_expression_and_after_a_write():
    """An evaluated expression keeps its value and drops its operands; lt.grad still differentiates
    it from its origin, unless a tensor below was written since (then a clear error, never the
    gradient of other values)."""
    xn = _rand((6,), 9)
    x = lt.asarray(xn.copy())
    loss = lt.sum(lt.sin(x) * x)
    assert abs(float(loss) - float((np.sin(xn) * xn).sum())) < 1e-12        # evaluates loss
    g = lt.grad(loss, x)
    np.testing.assert_allclose(g.numpy(), np.cos(xn) * xn + np.sin(xn), rtol=1e-12)
    x[...] += 1.0
    with pytest.raises(ValueError, match="was written since"):
        lt.grad(loss, x)
