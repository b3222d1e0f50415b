"""bfloat16 on CUDA through cuDNN (GPU only): conv2d, dgrad and wgrad, the CBR forward (training and
inference) and its fused backward against a float64 reference computed from the same bfloat16
operands, and the CBR forward and backward against PyTorch's bfloat16 cuDNN path where PyTorch is
installed; explain names the math and no step runs on the host. Measured errors are printed.

bfloat16 keeps 8 significand bits: one rounding is 2^-9 (2e-3) relative. The bounds below are from
measurement with room for other shapes: a rounded result (1e-2), BN's normalisation of a rounded
conv output (2e-2), and the backward's dBN cancellation on rounded activations (3e-2)."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.cbr.conv_reference import conv2d_nhwc_reference
from tests.plan.conv.test_float32_cuda_gpu import CASES, CBR_CASES, CBR_IDS, IDS, _bn_operands, _cbr, check, cuda
from tests.plan.conv.test_float32_cuda_gpu import operands as float32_operands
from tests.support.conv_grad_reference import dgrad_reference, wgrad_reference
from tests.support.devices import cudnn_ready

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and the cuDNN frontend")]

BF16 = np.dtype(lt.bfloat16)
ROUNDED = 1e-2
ROUNDED_BN = 2e-2
BACKWARD = 3e-2


def operands(x_shape, w_shape, stride, padding, dilation=1, seed=0):
    return float32_operands(x_shape, w_shape, stride, padding, dilation, BF16, seed)


def f64(*arrays):
    return [a.astype(np.float64) for a in arrays]


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation", CASES, ids=IDS)
def test_bfloat16_conv_dgrad_wgrad_match_float64(x_shape, w_shape, stride, padding, dilation):
    x, w, dy = operands(x_shape, w_shape, stride, padding, dilation)
    X, W, DY = cuda(x, w, dy)
    kw = dict(stride=stride, padding=padding, dilation=dilation)
    made = {"conv2d": lambda: lt.conv2d(X, W, **kw), "dgrad": lambda: lt.conv2d_backward_data(DY, W, x_shape, **kw),
            "wgrad": lambda: lt.conv2d_backward_filter(X, DY, w_shape, **kw)}
    x64, w64, dy64 = f64(x, w, dy)
    want = {"conv2d": conv2d_nhwc_reference(x64, w64, stride, padding, dilation),
            "dgrad": dgrad_reference(dy64, w64, x_shape, stride, padding, dilation),
            "wgrad": wgrad_reference(x64, dy64, w_shape, stride, padding, dilation)}
    for name, make in made.items():
        value = lt.evaluate(make()).numpy()
        assert value.dtype == BF16, name
        check(f"bfloat16 {name} {x_shape} * {w_shape}", value, want[name], ROUNDED)
        text = str(lt.explain(make(), source=False))
        assert "on the host" not in text and "bfloat16 (float32 accumulation)" in text, text


@pytest.mark.parametrize("x_shape, w_shape, stride, padding", CBR_CASES, ids=CBR_IDS)
def test_bfloat16_cbr_forward_training_and_inference_against_float64(x_shape, w_shape, stride, padding):
    x, w, _ = operands(x_shape, w_shape, stride, padding, seed=1)
    k = w_shape[0]
    gamma, beta, rm0, rv0 = _bn_operands(k, 2)
    RM, RV = cuda(rm0.copy(), rv0.copy())
    saved = lt.BatchNormSaved()
    y = lt.evaluate(_cbr(x, w, gamma, beta, RM, RV, stride, padding, True, saved)).numpy()
    assert y.dtype == BF16
    c = conv2d_nhwc_reference(*f64(x, w), stride, padding, 1)
    mean, var = c.mean(axis=(0, 1, 2)), c.var(axis=(0, 1, 2))
    n = c.size // k
    check("bfloat16 CBR forward y", y, np.maximum((c - mean) / np.sqrt(var + 1e-5) * gamma + beta, 0), ROUNDED_BN)
    check("bfloat16 CBR forward conv_out", saved.conv_out.numpy(), c, ROUNDED)
    check("bfloat16 CBR saved_mean", saved.saved_mean.numpy(), mean, ROUNDED)
    check("bfloat16 CBR running_var", RV.numpy(), 0.9 * rv0 + 0.1 * var * n / (n - 1), ROUNDED)
    text = str(lt.explain(_cbr(x, w, gamma, beta, RM, RV, stride, padding, True), source=False))
    assert "on the host" not in text and "statistics reduction" in text, text
    rm, rv = RM.numpy().copy(), RV.numpy().copy()
    y = lt.evaluate(_cbr(x, w, gamma, beta, RM, RV, stride, padding, False)).numpy()
    want = np.maximum((c - rm) / np.sqrt(rv.astype(np.float64) + 1e-5) * gamma + beta, 0)
    check("bfloat16 CBR inference y", y, want, ROUNDED_BN)
    assert np.array_equal(RM.numpy(), rm) and np.array_equal(RV.numpy(), rv)


@pytest.mark.parametrize("form", ["relu", "residual", "bn"])
@pytest.mark.parametrize("x_shape, w_shape, stride, padding", CBR_CASES, ids=CBR_IDS)
def test_bfloat16_cbr_backward_against_float64(x_shape, w_shape, stride, padding, form):
    from lazytensor.autodiff.patterns import matching_pattern
    from lazytensor.core.expr import as_computed
    from tests.plan.conv.test_cbr_backward_gpu import forward, reference
    x, w, dy = operands(x_shape, w_shape, stride, padding, seed=5)
    gamma, beta, _, _ = _bn_operands(w_shape[0], 6)
    skip = np.random.default_rng(7).standard_normal(dy.shape).astype(BF16)
    root, saved, y, skip_t = forward(x, w, gamma, beta, skip, form, stride, padding)
    pattern = matching_pattern(root)
    assert pattern is not None and pattern.form == form
    grads = pattern.gradients(root, lt.asarray(dy, device="cuda"))
    want = reference(*f64(x, w), gamma, beta, skip, dy, y, saved, form, stride, padding)
    root = as_computed(root)
    bn = root.args[0] if form == "relu" else root.args[0].args[0] if form == "residual" else root
    x_t, w_t = bn.args[0].args
    named = {"x": x_t, "w": w_t, "gamma": bn.args[1], "beta": bn.args[2]}
    if form == "residual":
        named["skip"] = skip_t
    text = str(lt.explain(grads[x_t], source=False))
    assert "on the host" not in text, text
    if w_shape[0] % 8 == 0:
        assert "DbnSums on cuda" in text or "cudnn dbn" in text.lower(), text
    for name, t in named.items():
        check(f"bfloat16 CBR backward ({form}) d{name} {x_shape}", lt.evaluate(grads[t]).numpy(), want[name], BACKWARD)


@pytest.mark.parametrize("x_shape, w_shape, stride, padding", CBR_CASES, ids=CBR_IDS)
def test_bfloat16_cbr_against_pytorch(x_shape, w_shape, stride, padding):
    """The same bfloat16 operands through PyTorch's cuDNN conv2d + batch_norm + relu (channels_last):
    the outputs and the gradients of x and w agree within the bfloat16 bounds."""
    torch = pytest.importorskip("torch")
    x, w, dy = operands(x_shape, w_shape, stride, padding, seed=9)
    gamma, beta, _, _ = _bn_operands(w_shape[0], 10)
    dev = "cuda"
    as_t = lambda a: torch.from_numpy(a.astype(np.float32)).to(dev)     # noqa: E731
    tx = as_t(x).permute(0, 3, 1, 2).to(torch.bfloat16).contiguous(memory_format=torch.channels_last).requires_grad_()
    tw = as_t(w).permute(0, 3, 1, 2).to(torch.bfloat16).contiguous(memory_format=torch.channels_last).requires_grad_()
    tg, tb = as_t(gamma).requires_grad_(), as_t(beta).requires_grad_()
    conv = torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding)
    ty = torch.relu(torch.nn.functional.batch_norm(conv, None, None, tg, tb,
                                                   training=True, eps=1e-5))
    ty.backward(as_t(dy).permute(0, 3, 1, 2).to(torch.bfloat16))
    nhwc = lambda t: t.detach().float().permute(0, 2, 3, 1).cpu().numpy()     # noqa: E731
    X, W, G, B, RM, RV = cuda(x, w, gamma, beta, np.zeros_like(gamma), np.ones_like(gamma))
    y = lt.relu(lt.batch_norm(lt.conv2d(X, W, stride=stride, padding=padding), G, B, RM, RV, training=True))
    gx, gw = lt.grad(lt.sum(y * lt.asarray(dy, device="cuda")), [X, W])
    got_y, got_x, got_w = (t.numpy() for t in lt.evaluate(y, gx, gw))
    check("bfloat16 CBR y against PyTorch", got_y, nhwc(ty), ROUNDED_BN)
    check("bfloat16 CBR dx against PyTorch", got_x, nhwc(tx.grad), BACKWARD)
    check("bfloat16 CBR dw against PyTorch", got_w, nhwc(tw.grad), BACKWARD)
