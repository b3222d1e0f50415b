"""lt.train_step(amp="bfloat16"): bfloat16 activations and weights, float32 master weights and
BatchNorm, no loss scaling (bfloat16 has float32's range), as PyTorch's bfloat16 autocast."""
import numpy as np
import pytest

import lazytensor as lt

from tests.nn.test_train_step import batches, conv_net, mlp


def bf16_step(net, seed=3):
    model = net(seed=seed, dtype=lt.bfloat16)
    opt = lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, opt, lt.train_step(model, lt.cross_entropy, opt, amp="bfloat16")


@pytest.mark.parametrize("net", [mlp, conv_net])
def test_bfloat16_amp_trains_and_tracks_float32(net):
    data = batches(2, seed=4, batch=8)
    model, opt, step = bf16_step(net)
    assert {p.dtype for p in model.parameters()} == {np.dtype(lt.bfloat16)} | (
        {np.dtype(np.float32)} if net is conv_net else set())          # BatchNorm stays float32
    assert all(m.dtype == np.float32 for m in opt.master if m is not None)
    losses = [float(step(*data[k % 2]).numpy()) for k in range(8)]
    reference = net(seed=3)
    ref_step = lt.train_step(reference, lt.cross_entropy, lt.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9))
    want = [float(ref_step(*data[k % 2]).numpy()) for k in range(8)]
    np.testing.assert_allclose(losses, want, rtol=5e-2, atol=2e-2)
    assert np.mean(losses[-2:]) < 0.5 * np.mean(losses[:2])
    assert step.scaler is None and int(opt.taken.numpy()) == 8
    assert step.last.x.dtype == lt.bfloat16 and step.last.loss.dtype == np.float32
    assert "amp: on, bfloat16 activations and weights" in lt.explain(step, source=False)


def test_amp_names_its_dtype_and_checks_the_model():
    model = mlp(dtype=np.float32)
    opt = lt.optim.SGD(model.parameters(), lr=0.05)
    with pytest.raises(ValueError, match="dtype=lt.bfloat16"):
        lt.train_step(model, lt.cross_entropy, opt, amp="bfloat16")
    with pytest.raises(ValueError, match="amp must be"):
        lt.train_step(model, lt.cross_entropy, opt, amp="float8")
