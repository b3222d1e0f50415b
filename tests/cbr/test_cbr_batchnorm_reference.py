"""Training-mode BN reference and bn_finalize against the textbook formula written out here."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazytensor.cbr.batchnorm_reference import batchnorm_train_reference, bn_finalize


@st.composite
def bn_cases(draw):
    shape = (draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 7)))
    if shape[0] * shape[1] * shape[2] < 2:
        shape = (2,) + shape[1:]
    seed = draw(st.integers(0, 2**32 - 1))
    momentum = draw(st.sampled_from([0.1, 0.01, 0.5, 1.0]))
    eps = draw(st.sampled_from([1e-5, 1e-3]))
    offset = draw(st.sampled_from([0.0, 3.0, -50.0]))  # a large mean stresses E[x^2] - mean^2
    return shape, seed, momentum, eps, offset


def operands(shape, seed, offset):
    rng = np.random.default_rng(seed)
    c = shape[-1]
    x = (rng.standard_normal(shape) * rng.uniform(0.5, 2.0, c) + offset).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, c).astype(np.float32)
    beta = rng.standard_normal(c).astype(np.float32)
    rm = rng.standard_normal(c).astype(np.float32)
    rv = rng.uniform(0.5, 2.0, c).astype(np.float32)
    return x, gamma, beta, rm, rv


def textbook(x, gamma, beta, rm, rv, momentum, eps):
    """BN written per channel with plain loops, as the formula reads."""
    x = x.astype(np.float64)
    c = x.shape[-1]
    flat = x.reshape(-1, c)
    n = flat.shape[0]
    y = np.empty_like(flat)
    mean, inv_std, new_rm, new_rv = (np.empty(c) for _ in range(4))
    for ch in range(c):
        col = flat[:, ch]
        m = sum(col) / n
        v = sum((col - m) ** 2) / n
        mean[ch], inv_std[ch] = m, 1 / np.sqrt(v + eps)
        y[:, ch] = gamma[ch] * (col - m) * inv_std[ch] + beta[ch]
        new_rm[ch] = (1 - momentum) * rm[ch] + momentum * m
        new_rv[ch] = (1 - momentum) * rv[ch] + momentum * v * n / (n - 1)
    return y.reshape(x.shape), mean, inv_std, new_rm, new_rv


@settings(max_examples=100, deadline=None)
@given(bn_cases())
def test_reference_matches_textbook(case):
    shape, seed, momentum, eps, offset = case
    x, gamma, beta, rm, rv = operands(shape, seed, offset)
    rm0, rv0 = rm.copy(), rv.copy()
    got = batchnorm_train_reference(x, gamma, beta, rm, rv, momentum, eps)
    y, mean, inv_std, new_rm, new_rv = textbook(x, gamma, beta, rm, rv, momentum, eps)
    np.testing.assert_allclose(got.y, y, rtol=1e-9, atol=1e-9)
    assert got.saved_mean.dtype == got.saved_inv_var.dtype == np.float32
    np.testing.assert_allclose(got.saved_mean, mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got.saved_inv_var, inv_std, rtol=1e-6)
    np.testing.assert_allclose(got.running_mean, new_rm, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got.running_var, new_rv, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(rm, rm0)  # the reference leaves its inputs alone
    np.testing.assert_array_equal(rv, rv0)


@settings(max_examples=100, deadline=None)
@given(bn_cases())
def test_finalize_from_sums_matches_textbook(case):
    shape, seed, momentum, eps, offset = case
    x, gamma, beta, rm, rv = operands(shape, seed, offset)
    y, mean, inv_std, new_rm, new_rv = textbook(x, gamma, beta, rm, rv, momentum, eps)
    c = shape[-1]
    x64 = x.astype(np.float64).reshape(-1, c)
    fin = bn_finalize(x64.sum(0), (x64 * x64).sum(0), x64.shape[0], gamma, beta, rm, rv, momentum, eps)
    for v in fin:
        assert v.dtype == np.float32 and v.shape == (c,)
    np.testing.assert_allclose(fin.saved_mean, mean, rtol=1e-6, atol=1e-6)
    # Sums lose digits to cancellation when |mean| >> std; float64 sums of float32 data keep ~1e-9 relative.
    np.testing.assert_allclose(fin.saved_inv_var, inv_std, rtol=1e-5)
    np.testing.assert_allclose(rm, new_rm, rtol=1e-6, atol=1e-6)  # updated in place
    np.testing.assert_allclose(rv, new_rv, rtol=1e-5, atol=1e-6)
    applied = x.astype(np.float64) * fin.eq_scale + fin.eq_bias
    np.testing.assert_allclose(applied, y, rtol=1e-4, atol=1e-4 * (1 + abs(offset)))


def test_finalize_of_float32_sums_from_float16_activations():
    # The CUDA path's stage 1 hands float32 sums of float16 conv outputs.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 6, 6, 16)).astype(np.float16)
    flat = x.astype(np.float32).reshape(-1, 16)
    gamma, beta = np.ones(16, np.float32), np.zeros(16, np.float32)
    rm, rv = np.zeros(16, np.float32), np.ones(16, np.float32)
    fin = bn_finalize(flat.sum(0), (flat * flat).sum(0), flat.shape[0], gamma, beta, rm, rv)
    ref = batchnorm_train_reference(x, gamma, beta, np.zeros(16, np.float32), np.ones(16, np.float32))
    np.testing.assert_allclose(fin.saved_mean, ref.saved_mean, atol=1e-5)
    np.testing.assert_allclose(fin.saved_inv_var, ref.saved_inv_var, rtol=1e-4)
    np.testing.assert_allclose(rm, ref.running_mean, atol=1e-6)
    np.testing.assert_allclose(rv, ref.running_var, rtol=1e-5)


def test_momentum_one_takes_the_batch_statistics():
    x = np.array([[1.0, 10.0], [3.0, 14.0]], np.float32)
    rm, rv = np.full(2, 7.0, np.float32), np.full(2, 7.0, np.float32)
    bn_finalize(x.sum(0), (x * x).sum(0), 2, np.ones(2), np.zeros(2), rm, rv, momentum=1.0)
    np.testing.assert_allclose(rm, [2.0, 12.0])
    np.testing.assert_allclose(rv, [2.0, 8.0])  # unbiased: biased var (1, 4) * 2 / 1


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(count=1), ValueError, r"more than one value per channel \(N\*H\*W = 1\)"),
        (dict(gamma=np.ones(2)), ValueError, r"gamma must have shape \(3,\)"),
        (dict(sumsq=np.ones((3, 1))), ValueError, r"sumsq must have shape \(3,\)"),
        (dict(running_var=np.ones(4, np.float32)), ValueError, r"running_var must have shape \(3,\)"),
        (dict(running_mean=[0.0, 0.0, 0.0]), TypeError, r"running_mean must be a NumPy array"),
        (dict(running_var=np.ones(3, np.int32)), TypeError, r"running_var must be a floating-point array"),
    ],
)
def test_finalize_errors_leave_running_statistics_untouched(kwargs, error, match):
    args = dict(
        sum=np.ones(3),
        sumsq=np.full(3, 2.0),
        count=4,
        gamma=np.ones(3),
        beta=np.zeros(3),
        running_mean=np.full(3, 5.0, np.float32),
        running_var=np.full(3, 6.0, np.float32),
    )
    args.update(kwargs)
    rm, rv = args["running_mean"], args["running_var"]
    rm0 = np.array(rm, copy=True)
    rv0 = np.array(rv, copy=True)
    with pytest.raises(error, match=match):
        bn_finalize(**args)
    np.testing.assert_array_equal(np.asarray(rm), rm0)
    np.testing.assert_array_equal(np.asarray(rv), rv0)


def test_reference_needs_two_values_per_channel():
    with pytest.raises(ValueError, match="more than one value per channel"):
        batchnorm_train_reference(np.ones((1, 1, 1, 3)), np.ones(3), np.zeros(3), np.zeros(3), np.ones(3))
