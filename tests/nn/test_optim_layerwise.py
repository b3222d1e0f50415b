"""LARS, LAMB and gradient clipping against their rules written out in float64 NumPy, 20 steps."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.nn.optim import LAMB, LARS
from lazytensor.nn.utils import clip_grad_norm, clip_grad_norm_, get_total_norm


def _norm(x):
    return np.sqrt(np.sum(x * x))


def lars_reference(w, grads, lr, momentum, weight_decay, trust_coefficient):
    w = w.astype(np.float64)
    buf = None
    for g in grads:
        g = g.astype(np.float64)
        wn, gn = _norm(w), _norm(g)
        local = trust_coefficient * wn / (gn + weight_decay * wn) if wn > 0 and gn > 0 else 1.0
        d = (g + weight_decay * w) * local
        buf = d if buf is None or not momentum else momentum * buf + d
        w = w - lr * buf
    return w


def lamb_reference(w, grads, lr, b1, b2, eps, weight_decay):
    w = w.astype(np.float64)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        g = g.astype(np.float64)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        u = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + weight_decay * w
        wn, un = _norm(w), _norm(u)
        ratio = wn / un if wn > 0 and un > 0 else 1.0
        w = w - lr * ratio * u
    return w


def _run(opt_cls, w0s, grads, **kw):
    ws = [lt.asarray(w.copy()) for w in w0s]
    opt = opt_cls(ws, **kw)
    for step in grads:
        opt.step([lt.asarray(g) for g in step])
    return [w.numpy() for w in ws]


def _problem(seed, shapes, steps=20, zero_weight=False):
    rng = np.random.default_rng(seed)
    w0s = [rng.standard_normal(s) for s in shapes]
    if zero_weight:
        w0s[0] = np.zeros(shapes[0])        # |w| = 0: the trust ratio is 1 on the first step
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(steps)]
    return w0s, grads


shapes = st.lists(st.sampled_from([(3,), (4, 5), (2, 1, 3), (1,)]), min_size=1, max_size=3)


@settings(max_examples=10, deadline=None)
@given(shapes=shapes, momentum=st.sampled_from([0.0, 0.9]), weight_decay=st.sampled_from([0.0, 1e-2]),
       zero_weight=st.booleans(), seed=st.integers(0, 99))
def test_lars_matches_its_rule_over_20_steps(shapes, momentum, weight_decay, zero_weight, seed):
    w0s, grads = _problem(seed, shapes, zero_weight=zero_weight)
    got = _run(LARS, w0s, grads, lr=0.1, momentum=momentum, weight_decay=weight_decay, trust_coefficient=0.02)
    for i, w in enumerate(w0s):
        want = lars_reference(w, [g[i] for g in grads], 0.1, momentum, weight_decay, 0.02)
        np.testing.assert_allclose(got[i], want, rtol=1e-11, atol=1e-12)


@settings(max_examples=10, deadline=None)
@given(shapes=shapes, weight_decay=st.sampled_from([0.0, 1e-2]), zero_weight=st.booleans(), seed=st.integers(0, 99))
def test_lamb_matches_its_rule_over_20_steps(shapes, weight_decay, zero_weight, seed):
    w0s, grads = _problem(seed, shapes, zero_weight=zero_weight)
    got = _run(LAMB, w0s, grads, lr=0.01, weight_decay=weight_decay)
    for i, w in enumerate(w0s):
        want = lamb_reference(w, [g[i] for g in grads], 0.01, 0.9, 0.999, 1e-6, weight_decay)
        np.testing.assert_allclose(got[i], want, rtol=1e-10, atol=1e-12)


def test_lars_zero_gradient_keeps_the_trust_ratio_at_one():
    w = lt.asarray(np.ones(4))
    LARS([w], lr=0.1, momentum=0.0).step([lt.asarray(np.zeros(4))])
    np.testing.assert_array_equal(w.numpy(), np.ones(4))


def test_lamb_float16_parameters_keep_float32_master_weights():
    w0s, grads = _problem(3, [(8,)], steps=5)
    w = lt.asarray(w0s[0].astype(np.float16))
    opt = LAMB([w], lr=0.01)
    for g in grads:
        opt.step([lt.asarray(g[0].astype(np.float16))])
    assert opt.master[0].dtype == np.float32 and w.dtype == np.float16
    want = lamb_reference(w0s[0].astype(np.float16), [g[0].astype(np.float16) for g in grads], 0.01, 0.9, 0.999,
                          1e-6, 0.0)
    np.testing.assert_allclose(w.numpy().astype(np.float64), want, rtol=2e-3, atol=2e-3)


def _total_norm_reference(grads, p):
    if p == math.inf:
        return max(np.max(np.abs(g)) for g in grads)
    return sum(np.sum(np.abs(g) ** p) for g in grads) ** (1 / p)


@settings(max_examples=15, deadline=None)
@given(shapes=shapes, p=st.sampled_from([2.0, 1.0, 3.0, math.inf]), max_norm=st.sampled_from([0.1, 1.0, 100.0]),
       seed=st.integers(0, 99))
def test_clip_grad_norm_matches_pytorchs_rule(shapes, p, max_norm, seed):
    rng = np.random.default_rng(seed)
    grads = [rng.standard_normal(s) for s in shapes]
    total = _total_norm_reference(grads, p)
    coef = min(max_norm / (total + 1e-6), 1.0)
    clipped, norm = clip_grad_norm([lt.asarray(g) for g in grads], max_norm, p)
    np.testing.assert_allclose(float(norm), total, rtol=1e-12)
    np.testing.assert_allclose(float(get_total_norm([lt.asarray(g) for g in grads], p)), total, rtol=1e-12)
    for c, g in zip(clipped, grads):
        np.testing.assert_allclose(lt.evaluate(c).numpy(), g * coef, rtol=1e-12, atol=1e-15)
    held = [lt.asarray(g.copy()) for g in grads]
    norm_ = clip_grad_norm_(held, max_norm, p)
    np.testing.assert_allclose(float(norm_), total, rtol=1e-12)     # the norm before clipping
    for h, g in zip(held, grads):
        np.testing.assert_allclose(h.numpy(), g * coef, rtol=1e-12, atol=1e-15)


def test_clip_grad_norm_of_float16_gradients_does_not_overflow():
    g = np.full(70000, 2.0, np.float16)          # sum of squares 280000 > float16's max
    clipped, norm = clip_grad_norm([lt.asarray(g)], 1.0)
    assert norm.dtype == np.float32
    np.testing.assert_allclose(float(norm), np.sqrt(280000.0), rtol=1e-6)
    assert clipped[0].dtype == np.float16


def test_clip_grad_norm_errors():
    with pytest.raises(TypeError, match="clip_grad_norm\\(grads"):
        clip_grad_norm_([lt.asarray(np.ones(3)) * 2], 1.0)
    with pytest.raises(ValueError, match="norm_type"):
        get_total_norm([lt.asarray(np.ones(3))], -1.0)
    with pytest.raises(ValueError, match="no gradients"):
        get_total_norm([], 2.0)


def _mlp(weights):
    model = lt.nn.Sequential(lt.nn.Linear(5, 7), lt.nn.ReLU(), lt.nn.Linear(7, 3))
    for p, q in zip(model.parameters(), weights):
        p[...] = q
    return model


@pytest.mark.parametrize("make_opt", [lambda ps: LARS(ps, lr=0.1, weight_decay=1e-4),
                                      lambda ps: LAMB(ps, lr=0.01, weight_decay=0.01)], ids=["LARS", "LAMB"])
def test_train_step_equals_the_plain_loop(make_opt):
    """The recorded step and opt.step(lt.grad(...)) give the same weights bit for bit."""
    rng = np.random.default_rng(0)
    x, y = lt.asarray(rng.standard_normal((8, 5)).astype(np.float32)), lt.asarray(rng.integers(0, 3, 8))
    weights = [rng.standard_normal(p.shape).astype(np.float32) for p in _mlp([]).parameters()]
    recorded = _mlp(weights)
    step = lt.train_step(recorded, lt.cross_entropy, make_opt(recorded.parameters()))
    plain = _mlp(weights)
    opt = make_opt(plain.parameters())
    for _ in range(3):
        step(x, y)
        opt.step(lt.grad(lt.cross_entropy(plain(x), y), plain.parameters()))
    for a, b in zip(recorded.parameters(), plain.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
