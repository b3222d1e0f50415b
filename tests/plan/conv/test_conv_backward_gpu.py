"""The backward convolutions and the conv / batch-norm gradient rules on CUDA, against the CPU path:
cuDNN conv_dgrad / conv_wgrad graphs for float16 and float32 (TF32 off, the suite's setting), and
cuDNN graph relaunch and CUDA-graph replay of a backward plan. GPU only."""
import numpy as np
import pytest

import lazytensor as lt
from tests.support.devices import cudnn_ready

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")]
needs_cudnn = pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and the cuDNN frontend")

# (x shape NHWC, w shape KRSC, stride, padding, dilation): channels multiples of 8 for the cuDNN path
CASES = [
    ((2, 8, 8, 16), (32, 3, 3, 16), 1, 1, 1),
    ((3, 9, 11, 8), (16, 3, 3, 8), 2, 1, 1),
    ((2, 12, 10, 24), (8, 3, 3, 24), 1, 2, 2),
    ((4, 14, 14, 32), (64, 1, 1, 32), 2, 0, 1),
    ((1, 10, 7, 16), (16, 3, 1, 16), (1, 2), (1, 0), 1),
]
IDS = ["3x3", "3x3-stride2", "3x3-dilation2", "1x1-stride2", "3x1-uneven"]


def operands(x_shape, w_shape, stride, padding, dilation, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(dtype)
    y_shape = lt.conv2d(lt.asarray(x, device="cpu"), lt.asarray(w, device="cpu"), stride=stride, padding=padding,
                        dilation=dilation).shape
    dy = rng.standard_normal(y_shape).astype(dtype)
    return x, w, dy


def assert_close(got, want, what, dtype):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    scale = float(np.abs(want).max()) or 1.0
    err = float(np.abs(got - want).max())
    # float16: one rounding of the result (2^-11) plus float32 accumulation-order noise
    limit = (2e-3 * scale + 1e-3) if dtype == np.float16 else (1e-5 * scale + 1e-6)
    assert err <= limit, f"{what}: max |error| {err:.3g} against max |CPU| {scale:.3g}"


def both_devices(fn, *arrays):
    """fn(*tensors) evaluated on CUDA and on the CPU, as host arrays."""
    out = []
    for device in ("cuda", "cpu"):
        out.append([lt.evaluate(e).numpy() for e in fn(*(lt.asarray(a, device=device) for a in arrays))])
    return out


@needs_cudnn
@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation", CASES, ids=IDS)
def test_cudnn_dgrad_and_wgrad_functions_match_the_cpu_path(x_shape, w_shape, stride, padding, dilation):
    import cupy
    from lazytensor.cbr.conv_cpu import conv2d_backward_data_nhwc, conv2d_backward_filter_nhwc
    from lazytensor.cbr.cudnn_cache import ConvGraphCache
    from lazytensor.cbr.cudnn_conv_backward import conv2d_dgrad, conv2d_wgrad
    cache = ConvGraphCache(tune=False, table=None)      # cuDNN's heuristic plan: exactly the graphs named
    x, w, dy = operands(x_shape, w_shape, stride, padding, dilation, np.float16)
    dx = conv2d_dgrad(cupy.asarray(dy), cupy.asarray(w), x_shape, stride, padding, dilation, cache=cache)
    dw = conv2d_wgrad(cupy.asarray(x), cupy.asarray(dy), w_shape, stride, padding, dilation, cache=cache)
    assert dx.dtype == cupy.float16 and dw.dtype == cupy.float16       # dW in the activations' dtype
    f32 = [a.astype(np.float32) for a in (x, w, dy)]
    assert_close(cupy.asnumpy(dx), conv2d_backward_data_nhwc(f32[2], f32[1], x_shape, stride, padding, dilation),
                 "dgrad", np.float16)
    assert_close(cupy.asnumpy(dw), conv2d_backward_filter_nhwc(f32[0], f32[2], w_shape, stride, padding, dilation),
                 "wgrad", np.float16)


@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=["float16", "float32"])
@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation", CASES[:3], ids=IDS[:3])
def test_backward_nodes_on_cuda_match_the_cpu_path(dtype, x_shape, w_shape, stride, padding, dilation):
    if not cudnn_ready():
        pytest.skip("the CUDA path is cuDNN's")
    x, w, dy = operands(x_shape, w_shape, stride, padding, dilation, dtype, seed=1)
    kw = dict(stride=stride, padding=padding, dilation=dilation)

    def backward(x, w, dy):
        return (lt.conv2d_backward_data(dy, w, x_shape, **kw), lt.conv2d_backward_filter(x, dy, w_shape, **kw))
    (dx, dw), (dx_cpu, dw_cpu) = both_devices(backward, x, w, dy)
    assert dx.dtype == dtype and dw.dtype == dtype
    assert_close(dx, dx_cpu, "dgrad", dtype)
    assert_close(dw, dw_cpu, "wgrad", dtype)
    X, W, DY = (lt.asarray(a, device="cuda") for a in (x, w, dy))
    text = lt.explain(lt.conv2d_backward_data(DY, W, x_shape, **kw), source=True)
    assert "cuDNN conv_dgrad graph for n" in text, text       # the graph the evaluation built, with its plan
    assert "on the host" not in text, text


@needs_cudnn
def test_relaunch_and_graph_replay_read_new_values():
    x_shape, w_shape, stride, padding, dilation = CASES[0]
    kw = dict(stride=stride, padding=padding, dilation=dilation)
    x, w, dy = operands(x_shape, w_shape, stride, padding, dilation, np.float16, seed=2)
    X, W, DY = (lt.asarray(a, device="cuda") for a in (x, w, dy))
    dx_out = lt.empty(x_shape, dtype=np.float16, device="cuda")
    dw_out = lt.empty(w_shape, dtype=np.float16, device="cuda")
    rng = np.random.default_rng(3)
    for call in range(4):       # planned, rebound (graph relaunched), captured, replayed
        new_dy = rng.standard_normal(dy.shape).astype(np.float16)
        DY[...] = lt.asarray(new_dy, device="cuda")
        dx_out[...] = lt.conv2d_backward_data(DY, W, x_shape, **kw)
        dw_out[...] = lt.conv2d_backward_filter(X, DY, w_shape, **kw)
        dx_cpu = lt.evaluate(lt.conv2d_backward_data(lt.asarray(new_dy), lt.asarray(w), x_shape, **kw)).numpy()
        dw_cpu = lt.evaluate(lt.conv2d_backward_filter(lt.asarray(x), lt.asarray(new_dy), w_shape, **kw)).numpy()
        assert_close(dx_out.numpy(), dx_cpu, f"dgrad, call {call}", np.float16)
        assert_close(dw_out.numpy(), dw_cpu, f"wgrad, call {call}", np.float16)


@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=["float16", "float32"])
@pytest.mark.parametrize("training", [True, False], ids=["training", "inference"])
def test_conv_and_batch_norm_rules_on_cuda_match_the_cpu(dtype, training):
    from lazytensor.autodiff.rules import GRADIENTS
    if dtype == np.float16 and not cudnn_ready():
        pytest.skip("the float16 conv path is cuDNN's")
    x_shape, w_shape, stride, padding, dilation = CASES[0]
    x, w, g = operands(x_shape, w_shape, stride, padding, dilation, dtype, seed=4)
    rng = np.random.default_rng(5)
    k = w_shape[0]
    vectors = [rng.standard_normal(k).astype(np.float32), rng.standard_normal(k).astype(np.float32),
               rng.standard_normal(k).astype(np.float32), rng.uniform(0.5, 2, k).astype(np.float32)]

    def gradients(x, w, g, gamma, beta, rm, rv):
        conv = lt.conv2d(x, w, stride=stride, padding=padding, dilation=dilation)
        bn = lt.batch_norm(conv, gamma, beta, rm, rv, training=training)
        dconv, dgamma, dbeta, _, _ = GRADIENTS["batch_norm"](bn, g)
        return (*GRADIENTS["conv2d"](conv, dconv), dgamma, dbeta)
    cuda, cpu = both_devices(gradients, x, w, g, *vectors)
    for name, a, b in zip(("dx", "dw", "dgamma", "dbeta"), cuda, cpu):
        assert a.dtype == b.dtype
        assert_close(a, b, name, dtype)
