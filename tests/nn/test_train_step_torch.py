"""lt.train_step against PyTorch on the CPU (skipped unless torch imports): 30 SGD steps from
identical weights and batches, the loss of each step, the weights after and the eval outputs to
1e-4 relative in float32; in AMP (float16 on the CPU path, PyTorch's CPU autocast in float16) to
2e-2, as tests/support/torch_training.assert_amp_close compares."""
import pytest

pytest.importorskip("torch")

from tests.support.torch_training import assert_amp_close, assert_close, train_both  # noqa: E402


@pytest.mark.parametrize("kind", ["vgg", "all_conv"])
def test_thirty_sgd_steps_match_pytorch(kind):
    assert_close(train_both(kind, "cpu"), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["vgg", "all_conv"])
def test_thirty_amp_steps_match_pytorch_amp(kind):
    assert_amp_close(kind, "cpu", rtol=2e-2)
