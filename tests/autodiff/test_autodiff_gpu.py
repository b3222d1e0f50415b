"""lt.grad on CUDA: the core gradient tests of autodiff/test_autodiff_rules.py and autodiff/test_autodiff.py with
tensors on the GPU (finite differences still by NumPy on the host). Skipped without CuPy and a
CUDA device."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402
from tests.support.autodiff_oracle import assert_gradients_match, finite_difference  # noqa: E402
from lazytensor.testing import dags  # noqa: E402
from tests.autodiff.test_autodiff import _leaves, _rand  # noqa: E402
from tests.autodiff.test_autodiff_rules import BINARY, REDUCTIONS, UNARY, VIEWS, _BUILD, _values, check  # noqa: E402


@pytest.mark.parametrize("op", list(UNARY))
def test_unary_rules_cuda(op):
    check(getattr(lt, op), [_values(1, (3, 4), *UNARY[op])], device="cuda", context=op)


@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 1, 4), (3, 1)), ((), (5,))])
def test_binary_rules_cuda(op, shapes):
    (da, db), build = BINARY[op], _BUILD[op]
    check(build, [_values(2, shapes[0], *da), _values(3, shapes[1], *db)], device="cuda", context=f"{op} {shapes}")


@pytest.mark.parametrize("kind", REDUCTIONS)
@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, True), ((0, 2), False)])
def test_reduction_rules_cuda(kind, axis, keepdims):
    x = _values(4, (2, 3, 4), 0.5, 2, signs=True)
    check(lambda t: getattr(lt, kind)(t * 1.5, axis=axis, keepdims=keepdims), [x], device="cuda",
          context=f"{kind} {axis} {keepdims}")


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_rules_cuda(name):
    check(VIEWS[name], [_values(11, (2, 3, 4), 0.5, 2, signs=True)], device="cuda", context=name)


def test_scatter_of_an_index_view_cuda():
    check(lambda x, y: lt.sin(x[1::2, 3])[:, None] * 2.0 + (x * y)[-2::-2, ::3],
          [_values(5, (7, 5), -2, 2), _values(6, (5,), -2, 2)], device="cuda", context="index views")


def test_ties_and_prod_with_zeros_cuda():
    x = np.array([[2.0, 0.0, 3.0, 3.0], [0.0, 5.0, 0.0, 5.0]])
    t = lt.asarray(x, device="cuda")
    g = lt.grad(lt.sum(lt.prod(t, axis=1)) + lt.sum(lt.max(t, axis=1)), t).numpy()
    np.testing.assert_allclose(g, [[0, 18, 0.5, 0.5], [0, 0.5, 0, 0.5]])


@settings(max_examples=10, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(dags(device="cuda", dtypes=(np.dtype(np.float64),), scalar_dtypes=(np.dtype(np.float64),), max_ops=6))
def test_random_dag_gradient_cuda(dag):
    leaves = _leaves(dag.expr)
    for k, t in enumerate(leaves):
        t.data[...] = lt.asarray(_rand(t.shape, seed=k, lo=-2.0, hi=2.0), device="cuda").data
    from tests.support.autodiff_oracle import numpy_value
    value = numpy_value(dag.expr)
    if not np.all(np.isfinite(value)):
        return
    w = _rand(value.shape, seed=99)
    grads = lt.grad(lt.sum(dag.expr * lt.asarray(w, device="cuda")), leaves)
    assert_gradients_match([g.numpy() for g in grads], finite_difference(dag.expr, leaves, w),
                           rtol=1e-4, atol=1e-5, context=repr(dag))


def test_gradient_and_update_are_one_kernel_each_cuda():
    arrays = [_rand((1 << 16,), seed=s).astype(np.float32) for s in range(4)]
    a, b, c, d = (lt.asarray(x.copy(), device="cuda") for x in arrays)
    grads = lt.grad(lt.sum(lt.tanh(a * b + c) * d), [a, b, c, d])
    for g in grads:
        with lt.profile() as p:
            lt.evaluate(g)
        assert p.launches == 1
    an, bn, cn, dn = arrays
    t = np.tanh(an * bn + cn)
    g0 = lt.grad(lt.sum(lt.tanh(a * b + c) * d), a)     # afresh: the gradients above kept their values
    del grads
    with lt.profile() as p:
        a[...] -= 0.1 * g0
    assert p.launches == 1
    np.testing.assert_allclose(a.numpy(), an - 0.1 * (1 - t * t) * dn * bn, rtol=1e-5, atol=1e-6)
