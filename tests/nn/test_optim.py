"""lt.nn.optim against PyTorch's documented update rules, written out in float64 NumPy."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.nn.optim import SGD, AdamW


def sgd_reference(w, grads, lr, momentum, dampening, weight_decay, nesterov):
    """torch.optim.SGD's algorithm (its documentation's pseudo-code)."""
    w = w.astype(np.float64)
    buf = None
    for g in grads:
        g = g.astype(np.float64) + weight_decay * w
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        w = w - lr * g
    return w


def adamw_reference(w, grads, lr, b1, b2, eps, weight_decay):
    w = w.astype(np.float64)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        g = g.astype(np.float64)
        w = w * (1 - lr * weight_decay)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat = m / (1 - b1 ** t)
        vhat = v / (1 - b2 ** t)
        w = w - lr * mhat / (np.sqrt(vhat) + eps)
    return w


@settings(max_examples=15, deadline=None)
@given(shape=st.sampled_from([(3,), (4, 5), (2, 1, 3)]), steps=st.integers(1, 4),
       momentum=st.sampled_from([0.0, 0.9]), dampening=st.sampled_from([0.0, 0.1]),
       weight_decay=st.sampled_from([0.0, 0.01]), nesterov=st.booleans(), seed=st.integers(0, 99))
def test_sgd_matches_pytorch_rule(shape, steps, momentum, dampening, weight_decay, nesterov, seed):
    if nesterov and (momentum == 0 or dampening != 0):
        with pytest.raises(ValueError, match="nesterov"):
            SGD([lt.zeros(shape, np.float32)], lr=0.1, momentum=momentum, dampening=dampening, nesterov=True)
        return
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(shape)
    grads = [rng.standard_normal(shape) for _ in range(steps)]
    w = lt.asarray(w0.copy())
    opt = SGD([w], lr=0.05, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
    for g in grads:
        opt.step([lt.asarray(g)])
    want = sgd_reference(w0, grads, 0.05, momentum, dampening, weight_decay, nesterov)
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-12, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(shape=st.sampled_from([(3,), (4, 5)]), steps=st.integers(1, 4), weight_decay=st.sampled_from([0.0, 0.01]),
       seed=st.integers(0, 99))
def test_adamw_matches_pytorch_rule(shape, steps, weight_decay, seed):
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(shape)
    grads = [rng.standard_normal(shape) for _ in range(steps)]
    w = lt.asarray(w0.copy())
    opt = AdamW([w], lr=0.01, weight_decay=weight_decay)
    for g in grads:
        opt.step([lt.asarray(g)])
    want = adamw_reference(w0, grads, 0.01, 0.9, 0.999, 1e-8, weight_decay)
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-10, atol=1e-12)


def test_float16_parameters_keep_float32_master_weights():
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(64).astype(np.float16)
    grads = [rng.standard_normal(64).astype(np.float16) * 1e-3 for _ in range(5)]
    w = lt.asarray(w0.copy())
    opt = SGD([w], lr=0.01, momentum=0.9)
    for g in grads:
        opt.step([lt.asarray(g)])
    want = sgd_reference(w0, [g.astype(np.float32) for g in grads], 0.01, 0.9, 0.0, 0.0, False)
    np.testing.assert_allclose(opt.master[0].numpy(), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(w.numpy(), want.astype(np.float32).astype(np.float16))


def test_bad_gradients_are_clear_errors():
    w = lt.zeros((3,), np.float32)
    opt = SGD([w], lr=0.1)
    with pytest.raises(ValueError, match="one gradient per parameter"):
        opt.step([])
    with pytest.raises(ValueError, match=r"shape \(4,\), its parameter \(3,\)"):
        opt.step([lt.zeros((4,), np.float32)])
    with pytest.raises(TypeError, match="floating-point"):
        SGD([lt.zeros((3,), np.int32)], lr=0.1)
