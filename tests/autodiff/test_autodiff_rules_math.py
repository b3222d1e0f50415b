"""The gradient rules of log2 ... logaddexp2 (lazytensor/autodiff/rules_math.py) against float64
central finite differences, inside each function's domain."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.core.expr import apply

UNARY = {"log2": (0.2, 3), "log10": (0.2, 3), "exp2": (-2, 2), "arcsin": (-0.9, 0.9), "arccos": (-0.9, 0.9),
         "arctan": (-3, 3), "sinh": (-2, 2), "cosh": (-2, 2), "arcsinh": (-3, 3), "arccosh": (1.2, 4),
         "arctanh": (-0.9, 0.9), "reciprocal": (0.3, 3), "cbrt": (0.2, 3), "fabs": (0.1, 3)}
BINARY = ["arctan2", "hypot", "fmod", "logaddexp", "logaddexp2", "copysign", "nextafter"]


def _fd(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_rules_match_finite_differences(op):
    lo, hi = UNARY[op]
    xn = np.random.default_rng(0).uniform(lo, hi, 9)
    x = lt.asarray(xn.copy())
    g = lt.grad(lt.sum(apply(op, x) * 1.5), x).numpy()
    np.testing.assert_allclose(g, 1.5 * _fd(getattr(np, op), xn), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("op", BINARY)
def test_binary_rules_match_finite_differences(op):
    rng = np.random.default_rng(1)
    an, bn = rng.uniform(0.5, 2, 7) * rng.choice([-1, 1], 7), rng.uniform(0.7, 1.9, 7) * rng.choice([-1, 1], 7)
    a, b = lt.asarray(an.copy()), lt.asarray(bn.copy())
    ga, gb = lt.grad(lt.sum(apply(op, a, b)), [a, b])
    f = getattr(np, op)
    want_a = _fd(lambda v: f(v, bn), an)
    want_b = np.zeros_like(bn) if op in ("copysign", "nextafter") else _fd(lambda v: f(an, v), bn)
    np.testing.assert_allclose(ga.numpy(), want_a, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb.numpy(), want_b, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("op", ["rint", "trunc"])
def test_piecewise_constant_ops_pass_no_gradient(op):
    x = lt.asarray(np.array([0.3, 1.7, -2.2]))
    g = lt.grad(lt.sum(apply(op, x) + x), x)
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0, 1.0])
