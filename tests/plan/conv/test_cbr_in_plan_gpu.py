"""The fused CBR backward inside a recorded training step on CUDA, float16 with AMP (GPU only): every
Conv-BN block takes it (the vectorized dBN kernels or cuDNN's dbn graph, whichever measured faster),
the losses and weights agree with the per-op path's, and the recording call, the captured graph and
its replays agree with a plan recorded on each call."""
import numpy as np
import pytest

import lazytensor as lt
from tests.support.devices import cudnn_ready

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and the cuDNN frontend")]

from lazytensor.autodiff import patterns  # noqa: E402
from tests.nn.test_train_step import OPTIMIZERS, batches, resnet_block  # noqa: E402


def _model():
    return resnet_block(dtype=np.float16)


def _data(n, seed=0):
    return batches(n, seed=seed, batch=16, dtype=np.float16)


def _train(data, monkeypatch=None):
    model = _model()
    opt = OPTIMIZERS["momentum"](model.parameters())
    step = lt.train_step(model, lt.cross_entropy, opt, amp=True)
    if monkeypatch is None:
        return step, model, [float(step(x, y).numpy()) for x, y in data]
    with monkeypatch.context() as m:
        m.setattr(patterns, "BACKWARD_PATTERNS", [])
        losses = [float(step(x, y).numpy()) for x, y in data[:1]]
    return step, model, losses + [float(step(x, y).numpy()) for x, y in data[1:]]


def test_every_block_takes_the_fused_backward_and_matches_the_per_op_path(monkeypatch):
    data = _data(4, seed=1)
    step, model, losses = _train(data)
    text = str(lt.explain(step, source=False, detail=True))
    assert "backward: 4 of 4 Conv-BN blocks take the fused CBR backward" in text
    assert text.count("the 1-bit ReLU mask the backward of this plan reads") == 3
    _, reference, want = _train(data, monkeypatch)
    np.testing.assert_allclose(losses, want, rtol=2e-2)
    for (name, a), (_, b) in zip(model.state_dict().items(), reference.state_dict().items()):
        scale = max(1.0, float(np.abs(b).max()))
        assert float(np.abs(a.astype(np.float64) - b).max()) <= 2e-2 * scale, name


def test_replays_equal_a_plan_recorded_on_each_call():
    data = _data(4, seed=2)
    step, replayed, losses = _train(data)        # recorded, then captured, then launched as one graph
    assert step.last.calls == 4
    model = _model()
    opt = OPTIMIZERS["momentum"](model.parameters())
    got = [float(lt.train_step(model, lt.cross_entropy, opt, amp=True)(x, y).numpy()) for x, y in data]
    np.testing.assert_array_equal(losses, got)
    for (name, a), (_, b) in zip(replayed.state_dict().items(), model.state_dict().items()):
        np.testing.assert_array_equal(a, b, err_msg=name)
