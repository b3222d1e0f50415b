"""Bad CBR input fails at construction with a message that says what was wrong and what to do, and a
CBR step that fails at run time leaves the running statistics as they were."""
from __future__ import annotations

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.plan.conv.steps as conv_steps
import lazytensor.plan.steps as lt_steps
from lazytensor.cbr import finalize_cpu, finalize_numpy

F32 = np.float32


def t(shape, dtype=F32, seed=0, device="cpu"):
    rng = np.random.default_rng(seed)
    return lt.asarray((rng.standard_normal(shape) + 0.5).astype(dtype), device=device)


def vectors(k, device="cpu"):
    """gamma, beta, running_mean, running_var: float32 (k,), not the (0, 1) defaults."""
    rng = np.random.default_rng(1)
    return [lt.asarray(v.astype(F32), device=device) for v in
            (rng.uniform(0.5, 1.5, k), rng.uniform(-0.5, 0.5, k), rng.uniform(-0.5, 0.5, k), rng.uniform(0.5, 2, k))]


@pytest.fixture
def xw():
    return t((2, 5, 5, 3)), t((4, 3, 3, 3), seed=1)


# -- conv2d ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape, w_shape, match", [
    ((5, 5, 3), (4, 3, 3, 3), r"conv2d expects x of rank 4, \(N, H, W, C\) with channels last; got rank 3"),
    ((2, 5, 5, 3), (4, 3, 3), r"conv2d expects w of rank 4, \(K, R, S, C\).*got rank 3"),
    ((2, 5, 5, 3, 1), (4, 3, 3, 3), r"rank 4.*got rank 5"),
    # NCHW activations with KRSC weights: the channel counts disagree, and the message names both layouts
    ((2, 3, 5, 5), (4, 3, 3, 3), r"x has 5 channels but w expects 3 \(x is NHWC with shape \(2, 3, 5, 5\)"),
    ((2, 5, 5, 3), (4, 3, 3, 4), r"x has 3 channels but w expects 4"),
    # KCRS (PyTorch) weights with NHWC x
    ((2, 5, 5, 4), (8, 4, 3, 3), r"x has 4 channels but w expects 3 .*w is KRSC"),
    ((2, 2, 2, 3), (4, 3, 3, 3), r"output would be empty .*pad more or use a smaller window"),
])
def test_conv2d_shapes_and_layouts(x_shape, w_shape, match):
    with pytest.raises(ValueError, match=match):
        lt.conv2d(t(x_shape), t(w_shape))


def test_conv2d_dtypes(xw):
    x, w = xw
    with pytest.raises(TypeError, match=r"floating-point x and w .*x is int32"):
        lt.conv2d(lt.asarray(np.ones((2, 5, 5, 3), np.int32)), w)
    with pytest.raises(TypeError, match=r"x is float32 but w is float16; cast one"):
        lt.conv2d(x, w.astype(np.float16))


@pytest.mark.parametrize("kw, exc, match", [
    (dict(stride=0), ValueError, r"stride must be positive"),
    (dict(dilation=(1, 0)), ValueError, r"dilation must be positive"),
    (dict(padding=-1), ValueError, r"padding must be >= 0"),
    (dict(stride=(1, 2, 3)), TypeError, r"stride must be an int or a pair of ints"),
    (dict(padding=1.5), TypeError, r"padding must be an int or a pair"),
])
def test_conv2d_arguments(xw, kw, exc, match):
    with pytest.raises(exc, match=match):
        lt.conv2d(*xw, **kw)


def test_conv2d_bias_length(xw):
    with pytest.raises(ValueError, match=r"bias must have shape \(4,\), one value per out-channel; got \(3,\)"):
        lt.conv2d(*xw, bias=lt.zeros((3,), np.float32))


def test_conv2d_operand_kind(xw):
    with pytest.raises(TypeError, match=r"w must be a Tensor or an expression, got list"):
        lt.conv2d(xw[0], [[1.0]])


# -- batch_norm ------------------------------------------------------------------------------------

def test_batch_norm_vectors_wrong_length(xw):
    c = lt.conv2d(*xw)
    g, b, rm, rv = vectors(4)
    with pytest.raises(ValueError, match=r"beta must have shape \(4,\), one value per channel of x "
                                         r"\(x has shape \(2, 3, 3, 4\)\); got \(3,\)"):
        lt.batch_norm(c, g, lt.zeros((3,), np.float32), rm, rv)
    with pytest.raises(ValueError, match=r"running_var must have shape \(4,\).*got \(4, 1\)"):
        lt.batch_norm(c, g, b, rm, lt.ones((4, 1), np.float32))


def test_batch_norm_dtypes(xw):
    c = lt.conv2d(*xw)
    g, b, rm, rv = vectors(4)
    with pytest.raises(TypeError, match=r"gamma must be float32; got float64"):
        lt.batch_norm(c, lt.ones((4,), np.float64), b, rm, rv)
    with pytest.raises(TypeError, match=r"running_mean must be float32; got float16"):
        lt.batch_norm(c, g, b, lt.zeros((4,), np.float16), rv)
    with pytest.raises(TypeError, match=r"batch_norm takes floating-point x; got int32"):
        lt.batch_norm(lt.asarray(np.ones((2, 3, 3, 4), np.int32)), g, b, rm, rv)


@pytest.mark.parametrize("which", [3, 4])
@pytest.mark.parametrize("bad, kind", [(np.zeros(4, F32), "ndarray"), ([1.0] * 4, "list")])
def test_batch_norm_running_stats_must_be_tensors(xw, which, bad, kind):
    c = lt.conv2d(*xw)
    args = vectors(4)
    if which == 4:
        bad = np.ones(4, F32) if kind == "ndarray" else bad
    args[which - 1] = bad
    name = "running_mean" if which == 3 else "running_var"
    with pytest.raises(TypeError, match=rf"{name} must be a Tensor \(it is updated in place\), got {kind}"):
        lt.batch_norm(c, *args)


def test_batch_norm_running_stats_expression_is_not_a_tensor(xw):
    g, b, rm, rv = vectors(4)
    with pytest.raises(TypeError, match=r"running_mean must be a Tensor .*got Expr"):
        lt.batch_norm(lt.conv2d(*xw), g, b, rm * 1, rv)


def test_batch_norm_rank(xw):
    g, b, rm, rv = vectors(4)
    with pytest.raises(ValueError, match=r"channel axis last, e.g. NHWC; got shape \(4,\)"):
        lt.batch_norm(lt.ones((4,), np.float32), g, b, rm, rv)


def test_batch_norm_one_value_per_channel_in_training():
    w = t((4, 3, 3, 3), seed=1)
    g, b, rm, rv = vectors(4)
    one = lt.conv2d(t((1, 3, 3, 3)), w)          # output (1, 1, 1, 4): one value per channel
    with pytest.raises(ValueError, match=r"training needs more than one value per channel; x has shape \(1, 1, 1, 4\)"):
        lt.batch_norm(one, g, b, rm, rv)
    y = lt.evaluate(lt.relu(lt.batch_norm(one, g, b, rm, rv, training=False)))    # inference is fine
    assert y.shape == (1, 1, 1, 4)


def test_batch_norm_fused_needs_a_conv_input(xw):
    x, w = xw
    g, b, rm, rv = vectors(3)
    with pytest.raises(ValueError, match=r"fused=True\) needs x to be conv2d\(...\) itself.*fused=None"):
        lt.batch_norm(x * 2, g, b, rm, rv, fused=True)
    g, b, rm, rv = vectors(4)
    with pytest.raises(ValueError, match=r"fused=True\) needs x to be conv2d"):
        lt.batch_norm(lt.conv2d(x, w, bias=lt.zeros((4,), np.float32)), g, b, rm, rv, fused=True)   # conv + bias: not conv2d
    lt.evaluate(lt.relu(lt.batch_norm(lt.conv2d(x, w), g, b, rm, rv, fused=True)))   # the CPU path takes it


@pytest.mark.parametrize("kw, match", [(dict(momentum=1.5), r"momentum .* in \[0, 1\]; got 1.5"),
                                       (dict(momentum=-0.1), r"momentum"),
                                       (dict(eps=-1e-5), r"eps must be >= 0")])
def test_batch_norm_momentum_and_eps(xw, kw, match):
    with pytest.raises(ValueError, match=match):
        lt.batch_norm(lt.conv2d(*xw), *vectors(4), **kw)


def test_cbr_block_channel_mismatch():
    block = lt.cbr.CBR(3, 4, 3, padding=1)
    with pytest.raises(ValueError, match=r"x has 4 channels but w expects 3"):
        block(t((2, 5, 5, 4)))


# -- running statistics untouched when a step fails -----------------------------------------------

class Boom(RuntimeError):
    pass


def _raise(*args, **kwargs):
    raise Boom("injected failure")


def _failing_conv(monkeypatch):
    monkeypatch.setattr(conv_steps, "conv2d_nhwc", _raise)


def _failing_statistics(monkeypatch):
    monkeypatch.setattr(lt_steps.FusedReduction, "run", _raise)


def _failing_finalize(monkeypatch):
    monkeypatch.setattr(finalize_cpu, "finalize_train", _raise)      # numba's, when calls wait for kernels
    monkeypatch.setattr(finalize_numpy, "finalize_train", _raise)    # its NumPy twin, while they compile


@pytest.mark.parametrize("inject", [_failing_conv, _failing_statistics, _failing_finalize],
                         ids=["conv", "statistics", "finalize"])
@pytest.mark.parametrize("with_relu", [True, False], ids=["cbr", "conv-bn"])
def test_running_stats_untouched_when_a_step_fails(xw, monkeypatch, inject, with_relu):
    x, w = xw
    g, b, rm, rv = vectors(4)
    before = rm.numpy().copy(), rv.numpy().copy()
    expr = lt.batch_norm(lt.conv2d(x, w), g, b, rm, rv)
    expr = lt.relu(expr) if with_relu else expr
    out = lt.empty(expr.shape, expr.dtype)
    steps = lt.explain(expr, out=out, source=False)       # planning succeeds
    assert "BatchNormFinalize" in steps
    inject(monkeypatch)
    with pytest.raises(Boom):
        out[...] = expr
    assert np.array_equal(rm.numpy(), before[0]) and np.array_equal(rv.numpy(), before[1])
    monkeypatch.undo()
    out[...] = expr                                       # and the same expression runs once fixed
    assert not np.array_equal(rm.numpy(), before[0])


def test_running_stats_untouched_when_the_conv_cannot_run(xw, monkeypatch):
    """A conv that fails for real (a destination of the wrong shape handed to the CPU conv)."""
    x, w = xw
    g, b, rm, rv = vectors(4)
    before = rm.numpy().copy(), rv.numpy().copy()
    real = conv_steps.conv2d_nhwc

    def wrong_out(x, w, stride, padding, dilation, out=None):
        return real(x, w, stride, padding, dilation, out=np.empty((1, 1, 1, 1), x.dtype))

    monkeypatch.setattr(conv_steps, "conv2d_nhwc", wrong_out)
    with pytest.raises(ValueError, match=r"out must be a C-contiguous float32 array"):
        lt.evaluate(lt.relu(lt.batch_norm(lt.conv2d(x, w), g, b, rm, rv)))
    assert np.array_equal(rm.numpy(), before[0]) and np.array_equal(rv.numpy(), before[1])


def test_running_stats_untouched_when_the_apply_kernel_fails(xw, monkeypatch):
    x, w = xw
    g, b, rm, rv = vectors(4)
    before = rm.numpy().copy(), rv.numpy().copy()
    expr = lt.relu(lt.batch_norm(lt.conv2d(x, w), g, b, rm, rv))
    monkeypatch.setattr(lt_steps.FusedElementwise, "run", _raise)
    with pytest.raises(Boom):
        lt.evaluate(expr)
    assert np.array_equal(rm.numpy(), before[0]) and np.array_equal(rv.numpy(), before[1])


# -- the fused CUDA path -----------------------------------------------------------------------------

def _cuda_ready() -> bool:
    if not lt.cuda_usable():
        return False
    try:
        import cudnn  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ready(), reason="needs CUDA, CuPy and cuDNN")
def test_cuda_fused_channels_not_multiple_of_8():
    x = t((2, 8, 8, 3), np.float16, device="cuda")
    w = t((8, 3, 3, 3), np.float16, seed=1, device="cuda")
    g, b, rm, rv = vectors(8, device="cuda")
    before = rm.numpy().copy(), rv.numpy().copy()
    expr = lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), g, b, rm, rv, fused=True))
    with pytest.raises(ValueError, match=r"fused=True but the fused CBR path cannot run: .*multiple of 8"):
        lt.evaluate(expr)
    assert np.array_equal(rm.numpy(), before[0]) and np.array_equal(rv.numpy(), before[1])
    # without fused=True it runs, and explain says why the cuDNN path was not taken
    text = lt.explain(lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), g, b, rm, rv)), source=False)
    assert "cuDNN path not taken" in text and "8" in text


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ready(), reason="needs CUDA, CuPy and cuDNN")
def test_cuda_float32_activations_fused():
    # float32 takes the cuDNN conv and lazytensor's statistics reduction (no genstats engine in float32)
    x = t((2, 8, 8, 8), F32, device="cuda")
    w = t((8, 3, 3, 8), F32, seed=1, device="cuda")
    g, b, rm, rv = vectors(8, device="cuda")
    expr = lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), g, b, rm, rv, fused=True))
    text = str(lt.explain(expr, source=False))
    assert "on the host" not in text and "no conv_fprop + genstats engine in float32" in text, text
