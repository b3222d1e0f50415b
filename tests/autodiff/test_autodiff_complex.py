"""lt.grad through complex values against central finite differences of NumPy's functions, PyTorch's
convention: the gradient of a real loss with respect to z = x + iy is dL/dx + i dL/dy. Holomorphic
ops (arithmetic, exp, log, the trigonometric functions, powers, sums, matmul, views), the others
(conj, real, imag, abs, sign, angle, casts), real operands of complex ops (a real gradient), both CPU
tiers; a complex loss is refused."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from tests.support.autodiff_oracle import complex_finite_differences

SETTINGS = settings(max_examples=8, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])






UNARY = {
    "multiply": lambda m, z: m.real(z * z * (1 + 2j)),
    "divide": lambda m, z: m.imag(1 / (z + 3)),
    "subtract": lambda m, z: m.imag((2 - z) * (1 - 1j)),
    "exp": lambda m, z: m.abs(m.exp(z)),
    "log": lambda m, z: m.real(m.log(z) * (0.5 - 1j)),
    "sin cos": lambda m, z: m.abs(m.sin(z) + m.cos(z) * 1j) ** 2,
    "sqrt": lambda m, z: m.imag(m.sqrt(z)),
    "tanh": lambda m, z: m.real(m.tanh(z / 2)),
    "reciprocal": lambda m, z: m.real(m.reciprocal(z + 2) * 1j),
    "power": lambda m, z: m.real(z ** 3),
    "conj": lambda m, z: m.imag(m.conj(z) * z * 1j + m.conj(z)),
    "abs": lambda m, z: m.abs(z) * 2,
    "sign": lambda m, z: m.imag(m.sign(z) * (2 + 1j)),
    "angle": lambda m, z: m.angle(z),
    "cast": lambda m, z: m.abs((m.imag(z) * 2).astype(np.complex128) * (1 + 1j) + z),
    "sum": lambda m, z: m.abs(m.sum(z * z, axis=-1)),
    "mean": lambda m, z: m.real(m.mean(z, axis=0) * 1j) * 3,
    "matmul": lambda m, z: m.abs(z @ m.swapaxes(z, -1, -2)),
    "view": lambda m, z: m.imag(m.reshape(m.swapaxes(z, -1, -2), (-1,)) * m.arange(z.size)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 4)), seed=st.integers(0, 2**16))
def test_gradients_match_complex_finite_differences(name, shape, seed, tier):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    weights = rng.uniform(0.5, 1.5, UNARY[name](np, z).shape)
    x = lt.asarray(z)
    got = lt.grad((UNARY[name](lt, x) * weights).sum(), x)
    assert got.dtype == np.complex128 and got.shape == z.shape
    want = complex_finite_differences(lambda v: float((UNARY[name](np, v) * weights).sum()), z)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


@SETTINGS
@given(n=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_real_operands_of_complex_ops_get_real_gradients(n, seed, tier):
    rng = np.random.default_rng(seed)
    z, r = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n)), rng.standard_normal((n, n))

    def loss(m, z, r):
        c = r.astype(np.complex128) if m is np else m.astype(r, np.complex128)
        return m.abs(z @ (z * r)).sum() + m.real(c * z * 1j).sum()
    x, y = lt.asarray(z), lt.asarray(r)
    gz, gr = lt.grad(loss(lt, x, y), [x, y])
    assert gr.dtype == np.float64
    np.testing.assert_allclose(np.asarray(gz), complex_finite_differences(lambda v: float(loss(np, v, r)), z),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gr), complex_finite_differences(lambda v: float(loss(np, z, v.real)), r + 0j).real,
                               rtol=1e-6, atol=1e-6)


def test_complex64_inputs_get_complex64_gradients():
    z = np.array([1 + 2j, -0.5 + 0.25j], dtype=np.complex64)
    x = lt.asarray(z)
    got = lt.grad((lt.abs(x) ** 2).sum(), x)             # d|z|^2 = 2 z
    assert got.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(got), 2 * z, rtol=1e-6)


def test_abs_and_sign_at_zero_have_a_zero_gradient():
    x = lt.asarray(np.array([0j, 3 + 4j]))
    np.testing.assert_allclose(np.asarray(lt.grad(lt.abs(x).sum(), x)), [0, 0.6 + 0.8j])
    assert np.asarray(lt.grad(lt.real(lt.sign(x)).sum(), x))[0] == 0


def test_a_cast_to_a_real_dtype_keeps_the_real_parts_gradient():
    x = lt.asarray(np.array([1 + 2j, -3j]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        loss = (x.astype(np.float64) * np.array([2.0, 5.0])).sum()
    np.testing.assert_array_equal(np.asarray(lt.grad(loss, x)), [2 + 0j, 5 + 0j])


def test_a_complex_loss_is_refused():
    x = lt.asarray(np.array([1 + 1j]))
    with pytest.raises(TypeError, match="real loss"):
        lt.grad((x * x).sum(), x)
