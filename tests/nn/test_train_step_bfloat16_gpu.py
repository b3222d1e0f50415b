"""lt.train_step(amp="bfloat16") on CUDA (GPU only): 30 SGD steps from identical weights and batches
against PyTorch's bfloat16 autocast (no GradScaler), losses to 2e-2; and the step on a small VGG."""
import numpy as np
import pytest

import lazytensor as lt
from tests.support.devices import cudnn_ready

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and the cuDNN frontend")]

from tests.support.torch_training import CLASSES, lt_net, train_both  # noqa: E402


@pytest.mark.parametrize("kind", ["vgg", "all_conv"])
def test_thirty_bfloat16_amp_steps_match_pytorch_bfloat16_autocast(kind):
    pytest.importorskip("torch")
    want, got, *_, step = train_both(kind, "cuda", amp="bfloat16")
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2, err_msg="loss per step (bfloat16 AMP)")
    assert step.scaler is None and step.last.x.dtype == lt.bfloat16


def test_bfloat16_amp_trains_on_cuda():
    """Without PyTorch: the small VGG in bfloat16 on CUDA learns a fixed batch."""
    model = lt_net("vgg", "cuda", lt.bfloat16)
    opt = lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = lt.train_step(model, lt.cross_entropy, opt, amp="bfloat16")
    rng = np.random.default_rng(0)
    x = lt.asarray(rng.standard_normal((16, 8, 8, 3)).astype(np.float32), device="cuda")
    y = lt.asarray(rng.integers(0, CLASSES, 16), device="cuda")
    losses = [step(x, y) for _ in range(20)]
    losses = [float(v.numpy()) for v in losses]
    assert all(np.isfinite(losses)) and np.mean(losses[-3:]) < 0.5 * np.mean(losses[:3])
