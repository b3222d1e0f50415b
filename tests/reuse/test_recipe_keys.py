"""Plan recipes are keyed by structure and scalars: -0.0 and 0.0 are different scalars (a plan bakes
its scalars in), and equal scalars key alike whether one Const object or several carry them (an MLP
step is planned once, not again on its second call)."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.reuse import several_recipes


@pytest.mark.parametrize("zeros", [(0.0, -0.0), (-0.0, 0.0)])
def test_several_results_keep_the_sign_of_a_zero_scalar(zeros):
    host = np.array([1.0, -2.0, 3.0])
    x = lt.asarray(host)
    a, b = lt.empty((3,), np.float64), lt.empty((3,), np.float64)
    for c in zeros * 2:
        lt.assign([(a, x * c), (b, x + c)])
        np.testing.assert_array_equal(np.signbit(a.numpy()), np.signbit(host * c))
        np.testing.assert_array_equal(np.signbit(b.numpy()), np.signbit(host + c))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_an_mlp_step_is_planned_once(dtype):
    rng = np.random.default_rng(2)
    x = lt.asarray(rng.standard_normal((12, 5)).astype(dtype))
    labels = lt.asarray(rng.integers(0, 3, 12))
    layers = [lt.nn.Linear(i, o, dtype=dtype, rng=rng) for i, o in ((5, 8), (8, 8), (8, 3))]
    params = [p for layer in layers for p in layer.parameters()]
    opt = lt.nn.SGD(params, lr=0.01)

    def step():
        h = x
        for layer in layers[:-1]:
            h = lt.relu(layer(h))
        opt.step(lt.grad(lt.cross_entropy(layers[-1](h).astype(np.float32), labels), params))

    plans = []
    for _ in range(4):
        before = several_recipes.plans_made[0]
        step()
        plans.append(several_recipes.plans_made[0] - before)
    assert plans == [1, 0, 0, 0]
