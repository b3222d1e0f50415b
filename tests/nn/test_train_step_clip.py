"""lt.train_step(..., max_grad_norm=...) clips as torch.nn.utils.clip_grad_norm_ does: the total norm
of all the gradients, each scaled by min(1, max_norm / (total + 1e-6)); step.grad_norm is the total.
The oracle: the same gradients (lt.grad, evaluated) clipped in float64 NumPy, then opt.step."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt


def _model(seed):
    model = lt.nn.Sequential(lt.nn.Linear(5, 7, dtype=np.float64), lt.nn.ReLU(), lt.nn.Linear(7, 3, dtype=np.float64))
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p[...] = rng.standard_normal(p.shape)
    return model


def _clipped(grads, max_norm, p):
    total = (max(np.max(np.abs(g)) for g in grads) if p == math.inf else
             sum(np.sum(np.abs(g) ** p) for g in grads) ** (1.0 / p))
    coef = min(max_norm / (total + 1e-6), 1.0)
    return [g * coef for g in grads], total


@settings(max_examples=8, deadline=None)
@given(p=st.sampled_from([2.0, math.inf, 1.0]), max_norm=st.sampled_from([0.05, 0.5, 1e3]),
       opt=st.sampled_from(["sgd", "adamw"]), seed=st.integers(0, 20))
def test_train_step_clips_as_clip_grad_norm_(p, max_norm, opt, seed):
    rng = np.random.default_rng(seed)
    make = ((lambda ps: lt.optim.SGD(ps, lr=0.1, momentum=0.9)) if opt == "sgd" else
            (lambda ps: lt.optim.AdamW(ps, lr=0.01)))
    recorded, plain = _model(seed), _model(seed)
    step = lt.train_step(recorded, lt.cross_entropy, make(recorded.parameters()), max_grad_norm=max_norm,
                         grad_norm_type=p)
    opt_plain = make(plain.parameters())
    for _ in range(3):
        x, y = lt.asarray(rng.standard_normal((8, 5))), lt.asarray(rng.integers(0, 3, 8))
        step(x, y)
        grads = [g.numpy() for g in lt.evaluate(*lt.grad(lt.cross_entropy(plain(x), y), plain.parameters()))]
        clipped, total = _clipped(grads, max_norm, p)
        opt_plain.step([lt.asarray(g) for g in clipped])
        np.testing.assert_allclose(float(step.grad_norm), total, rtol=1e-12)
    for a, b in zip(recorded.parameters(), plain.parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-11, atol=1e-13)


def test_a_new_max_norm_is_a_new_plan_and_bad_norm_types_are_refused():
    model = _model(0)
    step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.1), max_grad_norm=1.0)
    x, y = np.ones((4, 5)), np.zeros(4, np.int64)
    step(x, y)
    first = step.last
    step.max_grad_norm = 0.5
    step(x, y)
    assert step.last is not first
    with pytest.raises(ValueError, match="grad_norm_type"):
        lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.1), max_grad_norm=1.0,
                      grad_norm_type=0)


def test_amp_clips_the_unscaled_gradients():
    """AMP: the norm is of the gradients after unscaling; plain SGD then moves the float32 weights
    (the float16 parameters' master weights, BatchNorm's own) by lr * max_norm * total / (total + 1e-6)
    in L2 when it clips, and a max_norm above the norm changes nothing, bit for bit."""
    from tests.nn.test_train_step import batches, conv_net
    x, y = batches(1, batch=8)[0]

    def weights(opt):         # the float32 values each parameter's update computes in
        return np.concatenate([(m if m is not None else p).numpy().astype(np.float64).ravel()
                               for p, m in zip(opt.params, opt.master)])
    got = {}
    for max_norm in (None, 1e6, 0.01):
        model = conv_net(seed=3, dtype=np.float16)
        opt = lt.optim.SGD(model.parameters(), lr=0.1)
        step = lt.train_step(model, lt.cross_entropy, opt, amp=True, max_grad_norm=max_norm)
        before = weights(opt)
        step(x, y)
        got[max_norm] = [p.numpy() for p in model.parameters()], weights(opt) - before, step.grad_norm
    for a, b in zip(got[None][0], got[1e6][0]):
        np.testing.assert_array_equal(a, b)
    total = float(got[1e6][2])
    assert np.isfinite(total) and total > 0.01
    np.testing.assert_allclose(float(got[0.01][2]), total, rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(got[0.01][1]), 0.1 * 0.01 * total / (total + 1e-6), rtol=1e-3)
