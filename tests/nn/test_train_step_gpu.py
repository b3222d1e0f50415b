"""lt.train_step on CUDA (GPU only): 30 SGD steps against PyTorch from identical weights and batches
in float32 (1e-4) and in AMP (2e-2), the eval outputs after; the whole step replayed as ONE CUDA
graph launch in AMP (a network without a matmul step: cupy.matmul is not captured); convs with
channel counts cuDNN refuses, on zero-padded channels, against the host path."""
import numpy as np
import pytest

import lazytensor as lt
from tests.support.devices import cudnn_ready

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and the cuDNN frontend")]

from tests.support.torch_training import assert_amp_close, assert_close, train_both  # noqa: E402


@pytest.fixture
def torch_fp32():
    torch = pytest.importorskip("torch")
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False    # true float32 peers
    with lt.config.override(conv_allow_tf32=False, matmul_allow_tf32=False):          # and true float32 here
        yield torch
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.mark.parametrize("kind", ["vgg", "all_conv"])
def test_thirty_sgd_steps_match_pytorch_in_float32(kind, torch_fp32):
    assert_close(train_both(kind, "cuda"), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["vgg", "all_conv"])
def test_thirty_amp_steps_match_pytorch_amp(kind, torch_fp32):
    assert_amp_close(kind, "cuda", rtol=2e-2)


def test_the_whole_step_is_one_graph_launch_on_replay(torch_fp32):
    # In AMP. The first layer (C=3) and the classifier (K=10) run on cuDNN over zero-padded channels
    # (lazytensor.plan.conv.channel_padding).
    *_, step = train_both("all_conv", "cuda", amp=True, steps=4)
    text = lt.explain(step, source=False, detail=True)
    assert "the whole step is ONE graph of" in text, text[-2000:]
    assert "on the host" not in text, text
    # the two forwards and wgrads, the classifier's dgrad (none for the first layer: x is data)
    assert text.count("ChannelPadded: channels zero-padded for cuDNN") == 5, text
    assert "ChannelPadded: channels zero-padded for cuDNN (K 10 -> 16)" in text, text
    x = lt.asarray(np.random.default_rng(2).standard_normal((16, 8, 8, 3)).astype(np.float32), device="cuda")
    y = lt.asarray(np.random.default_rng(3).integers(0, 10, 16), device="cuda")
    with lt.profile() as p:
        step(x, y)
    kinds = [r.kind for r in p.kernels]
    assert kinds.count("graph") == 1, kinds
    assert len(kinds) <= 4, kinds          # the graph, the two input copies and the loss's copy


@pytest.mark.parametrize("x_shape, w_shape", [((4, 9, 7, 3), (8, 3, 3, 3)), ((4, 6, 6, 16), (10, 1, 1, 16)),
                                              ((3, 5, 5, 5), (12, 3, 3, 5))])
def test_channel_padded_convs_on_cudnn_match_the_host(x_shape, w_shape):
    from lazytensor.kernels.backend import backend_for
    from lazytensor.plan.conv.steps import ChannelPadded, Conv2dStep, ConvBackwardStep
    from lazytensor.plan.conv.channel_padding import cudnn_after_padding, padded_backward, padded_forward
    from lazytensor.ops.conv_bn import ConvAttrs
    import cupy
    assert cudnn_after_padding(x_shape, w_shape, np.float16)
    rng = np.random.default_rng(0)
    backend = backend_for("cuda")
    pad = (1, 1) if w_shape[1] == 3 else (0, 0)
    attrs = ConvAttrs((1, 1), pad, (1, 1))
    x, w = (cupy.asarray(rng.standard_normal(s).astype(np.float16)) for s in (x_shape, w_shape))
    y_shape = x_shape[:3] + (w_shape[0],)
    dy = cupy.asarray(rng.standard_normal(y_shape).astype(np.float16))
    cases = [
        (padded_forward(backend, x, w, attrs, cupy.empty(y_shape, np.float16)),
         Conv2dStep(backend, x, w, attrs, cupy.empty(y_shape, np.float16), "host")),
        (padded_backward(backend, "wgrad", x, dy, x_shape, w_shape, attrs, cupy.empty(w_shape, np.float16)),
         ConvBackwardStep(backend, "wgrad", x, dy, x_shape, w_shape, attrs, cupy.empty(w_shape, np.float16), "host")),
        (padded_backward(backend, "dgrad", dy, w, x_shape, w_shape, attrs, cupy.empty(x_shape, np.float16)),
         ConvBackwardStep(backend, "dgrad", dy, w, x_shape, w_shape, attrs, cupy.empty(x_shape, np.float16), "host")),
    ]
    for padded, host in cases:
        assert isinstance(padded, ChannelPadded) and padded.capture_refusal() is None, padded.describe()
        padded.run()
        padded.run()
        host.run()
        got, want = (cupy.asnumpy(s.out).astype(np.float32) for s in (padded, host))
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * max(1.0, float(np.abs(want).max())),
                                   err_msg=padded.describe())
