"""lt.train_step on CUDA (GPU only): 30 SGD steps against PyTorch from identical weights and batches
in float32 (1e-4) and in AMP (2e-2), the eval outputs after; the whole step replayed as ONE CUDA
graph launch (a network without a matmul step: cupy.matmul is not captured)."""
import numpy as np
import pytest

import lazytensor as lt
from devices import cudnn_ready

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and the cuDNN frontend")]

from torch_training import assert_close, train_both  # noqa: E402


@pytest.fixture
def torch_fp32():
    torch = pytest.importorskip("torch")
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False    # true float32 peers
    yield torch
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.mark.parametrize("kind", ["vgg", "all_conv"])
def test_thirty_sgd_steps_match_pytorch_in_float32(kind, torch_fp32):
    assert_close(train_both(kind, "cuda"), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["vgg", "all_conv"])
def test_thirty_amp_steps_match_pytorch_amp(kind, torch_fp32):
    result = train_both(kind, "cuda", amp=True)
    assert_close(result, rtol=2e-2, atol=2e-3)
    step = result[-1]
    assert not step.scaler.found_inf.numpy()


def test_the_whole_step_is_one_graph_launch_on_replay(torch_fp32):
    *_, step = train_both("all_conv", "cuda", steps=4)
    text = lt.explain(step, source=False)
    assert "the whole step is ONE graph of" in text, text[-2000:]
    x = lt.asarray(np.random.default_rng(2).standard_normal((16, 8, 8, 3)).astype(np.float32), device="cuda")
    y = lt.asarray(np.random.default_rng(3).integers(0, 10, 16), device="cuda")
    with lt.profile() as p:
        step(x, y)
    kinds = [r.kind for r in p.kernels]
    assert kinds.count("graph") == 1, kinds
    assert len(kinds) <= 4, kinds          # the graph, the two input copies and the loss's copy
