"""The fused CBR backward planned with its forward (lazytensor.ops.forward_saved): lt.grad of a training
forward that has not run reads the forward's saved statistics, conv output and 1-bit ReLU mask as
values of the same plan. Against the unfused rules (hypothesis-drawn shapes, every form), and inside
a recorded training step: every Conv-BN block takes it (plain, residual, no-ReLU, the first layer),
the loss and weights equal the per-op path's, the recording call and replays agree bit for bit."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import lazytensor as lt
from lazytensor.autodiff import patterns
from tests.support.cbr_backward_cases import Forward, cbr_cases, operands, unfused_gradients
from tests.plan.conv.test_cbr_backward import assert_close
from tests.nn.test_train_step import OPTIMIZERS, batches, resnet_block

SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])


def _forwards(case, dtype=np.float32):
    """The same forward twice: evaluated (for the unfused reference) and still an expression."""
    x_shape, w_shape, stride, padding, dilation, form, seed = case
    rng, x, w, gamma, beta = operands(x_shape, w_shape, form, seed, dtype)
    kw = dict(stride=stride, padding=padding, dilation=dilation)
    out_shape = lt.conv2d(lt.asarray(x), lt.asarray(w), **kw).shape
    skip = rng.standard_normal(out_shape).astype(dtype)
    dy = rng.standard_normal(out_shape).astype(dtype)
    return (Forward(x, w, gamma, beta, skip, form, kw), Forward(x, w, gamma, beta, skip, form, kw, evaluate=False),
            dy)


@SETTINGS
@given(cbr_cases())
def test_lt_grad_of_an_unevaluated_forward_reads_it_in_the_same_plan(case):
    done, lazy, dy = _forwards(case)
    names = list(lazy.operands())
    grads = lt.grad(lazy.root, [lazy.operands()[n] for n in names], grad_output=lt.asarray(dy))
    assert [what for _, what in grads.paths] and all("the forward's own steps in this plan" in what
                                                     for _, what in grads.paths)
    steps = lt.explain(list(grads), source=False).steps
    notes = " ".join(getattr(s, "note", "") or "" for s in steps)
    assert "dBN sums" in notes
    if lazy.form != "bn":
        assert "the 1-bit ReLU mask the backward of this plan reads" in notes
    got = lt.evaluate(*grads)
    want = unfused_gradients(done, dy)
    for name, g in zip(names, got):
        assert_close(g.numpy(), want[name], name, 2e-4)


def test_float16_activations_take_it_too():
    done, lazy, dy = _forwards(((2, 5, 5, 3), (16, 3, 3, 3), 1, 1, 1, "residual", 3), np.float16)
    names = list(lazy.operands())
    got = lt.evaluate(*lt.grad(lazy.root, [lazy.operands()[n] for n in names], grad_output=lt.asarray(dy)))
    want = unfused_gradients(done, dy)
    for name, g in zip(names, got):
        assert_close(g.numpy(), want[name], name, 2e-2)


# -- inside a recorded training step ------------------------------------------------------------

def _per_op(monkeypatch):
    """lt.grad without backward patterns: the per-op rules, the fused path's reference."""
    monkeypatch.setattr(patterns, "BACKWARD_PATTERNS", [])


def _train(data, per_op=False, monkeypatch=None, net=resnet_block, dtype=np.float32):
    model = net(dtype=dtype)
    opt = OPTIMIZERS["momentum"](model.parameters())
    if per_op:
        with monkeypatch.context() as m:
            _per_op(m)
            step = lt.train_step(model, lt.cross_entropy, opt)
            losses = [step(x, y).numpy() for x, y in data[:1]]      # recorded without the patterns
        losses += [step(x, y).numpy() for x, y in data[1:]]
    else:
        step = lt.train_step(model, lt.cross_entropy, opt)
        losses = [step(x, y).numpy() for x, y in data]
    return step, model, losses


def test_every_block_of_a_train_step_takes_the_fused_backward():
    # resnet_block: a first layer relu(bn(conv(x))), a BasicBlock with relu(bn(conv)), the residual
    # relu(bn(conv) + skip) and its downsample bn(conv) without a ReLU
    step, _, _ = _train(batches(1))
    text = str(lt.explain(step, source=False))
    assert "backward: 4 of 4 Conv-BN blocks take the fused CBR backward" in text
    for form in ("relu(batch_norm(conv2d(x, w)) + skip)", "relu(batch_norm(conv2d(x, w)))",
                 "batch_norm(conv2d(x, w)),"):
        assert f"fused CBR backward of {form}" in text, form
    assert text.count("no dgrad (x gets no gradient: the first layer)") == 1
    steps = step.last.plan.steps
    described = [s.describe(source=False) for s in steps]
    # the batch statistics are computed once per batch_norm, by the forward: none recomputed for the backward
    assert sum("meanvar over axes" in d for d in described) == 4
    assert not any(d.startswith("FusedReduction") and ("var over" in d or "mean over axes (0, 1, 2)" in d)
                   and "meanvar" not in d for d in described)
    assert sum("dBN sums: per channel" in d for d in described) == 4
    assert sum("the 1-bit ReLU mask the backward of this plan reads" in d for d in described) == 3
    # the downsample's dBN reads dY and the residual relu's mask: d(skip) = dY * mask is never written
    assert "so that its d(skip) = dY * mask is never written" in text
    assert not any("d(skip)" in d for d in described)


def test_a_train_step_equals_the_per_op_path(monkeypatch):
    data = batches(3, seed=5)
    step, model, losses = _train(data)
    ref_step, reference, want = _train(data, per_op=True, monkeypatch=monkeypatch)
    assert "dBN sums" not in str(lt.explain(ref_step, source=False))          # the per-op rules indeed
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    for (name, a), (_, b) in zip(model.state_dict().items(), reference.state_dict().items()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=name)


def test_replays_equal_a_recording_call_bit_for_bit():
    # the same state and batch, once through a replay of a plan recorded on another batch and once
    # through a plan recorded on this one: the saved statistics, conv output and mask a replay's
    # backward reads are its own forward's, never the recording call's
    data = batches(3, seed=7)
    _, replayed, losses = _train(data)
    model = resnet_block()
    opt = OPTIMIZERS["momentum"](model.parameters())
    got = []
    for x, y in data:       # a new lt.train_step per call: each call records its own plan
        got.append(lt.train_step(model, lt.cross_entropy, opt)(x, y).numpy())
    np.testing.assert_array_equal(losses, got)
    for (name, a), (_, b) in zip(replayed.state_dict().items(), model.state_dict().items()):
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_float64_blocks_take_the_per_op_rules_and_explain_says_why():
    step, _, _ = _train(batches(1, dtype=np.float64), dtype=np.float64)
    text = str(lt.explain(step, source=False, detail=True))
    assert "backward: 0 of 4 Conv-BN blocks take the fused CBR backward" in text
    assert text.count("the activations are float64") == 4


@pytest.mark.parametrize("evaluated", [True, False])
def test_a_downsample_reads_dy_and_the_mask_of_the_residual_relu(evaluated, monkeypatch):
    # relu(bn1(conv1(x)) + bn2(conv2(x2))): bn2's output gradient is dY * mask; its dBN reads dY and
    # the mask, from the evaluated forward's holders or from the same plan
    rng = np.random.default_rng(11)
    t = lambda *shape: lt.asarray(rng.standard_normal(shape).astype(np.float32))      # noqa: E731
    x, x2, w1, w2 = t(2, 5, 5, 3), t(2, 5, 5, 4), t(8, 3, 3, 3), t(8, 1, 1, 4)
    gamma1, beta1, gamma2, beta2 = (lt.asarray(rng.uniform(0.5, 2.0, 8).astype(np.float32)) for _ in range(4))
    dy = t(2, 5, 5, 8)

    def gradients():
        running = [lt.zeros((8,), np.float32), lt.ones((8,), np.float32)]
        bn1 = lt.batch_norm(lt.conv2d(x, w1, padding=1), gamma1, beta1, *running)
        bn2 = lt.batch_norm(lt.conv2d(x2, w2), gamma2, beta2, lt.zeros((8,), np.float32), lt.ones((8,), np.float32))
        root = lt.relu(bn1 + bn2)
        if evaluated:
            lt.evaluate(root)
        grads = lt.grad(root, [x, x2, w1, w2, gamma1, beta1, gamma2, beta2], grad_output=dy)
        return grads, [v.numpy() for v in lt.evaluate(*grads)]

    grads, got = gradients()
    what = [w for _, w in grads.paths]
    assert len(what) == 2 and "d(skip) = dY * mask is never written" in what[1]
    steps = lt.explain(list(grads), source=False).steps
    assert not any("d(skip)" in (getattr(s, "note", "") or "") for s in steps)
    with monkeypatch.context() as m:
        m.setattr(patterns, "BACKWARD_PATTERNS", [])
        _, want = gradients()
    for k, (a, b) in enumerate(zip(got, want)):
        assert_close(a, b.astype(np.float64), f"gradient {k}", 2e-4)


def test_the_mask_where_the_relu_is_a_value_evaluated_once(monkeypatch):
    # the cutter may evaluate a wide shared value once (lazytensor.plan.shared_values): the relu's
    # kernel is then that step, which also writes the mask
    from lazytensor.plan import shared_values
    monkeypatch.setattr(shared_values, "MIN_SAVED", -100)
    data = batches(2, seed=3)
    step, model, losses = _train(data)
    assert "backward: 4 of 4" in str(lt.explain(step, source=False))
    monkeypatch.setattr(shared_values, "MIN_SAVED", 4)
    _, reference, want = _train(data)
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    for (name, a), (_, b) in zip(model.state_dict().items(), reference.state_dict().items()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=name)


def test_explain_grad_says_which_backward_each_block_takes():
    _, lazy, dy = _forwards(((2, 4, 4, 3), (8, 3, 3, 3), 1, 1, 1, "relu", 5))
    text = str(lt.explain_grad(lazy.root, [lazy.w, lazy.gamma], grad_output=lt.asarray(dy)))
    assert "backward of relu(batch_norm(conv2d(" in text and "fused CBR backward of relu(batch_norm" in text
    assert "no dgrad (x gets no gradient: the first layer)" in text
    rng, x, w, gamma, beta = operands((2, 4, 4, 3), (8, 3, 3, 3), "relu", 5, np.float64)
    w = lt.asarray(w)
    bn = lt.batch_norm(lt.conv2d(lt.asarray(x), w, padding=1), lt.asarray(gamma), lt.asarray(beta),
                       lt.zeros((8,), np.float32), lt.ones((8,), np.float32))
    text = str(lt.explain_grad(lt.sum(lt.relu(bn)), [w]))
    assert "per-op rules" in text and "the activations are float64" in text
