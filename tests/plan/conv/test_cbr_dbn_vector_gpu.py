"""The vectorized dBN kernels on CUDA (GPU only): stage 1 of the CBR backward (d(conv_out), dgamma,
dbeta, d(skip)) against float64 NumPy from the same float16 operands, for the ReLU, residual and
no-ReLU forms, N*P*Q not a multiple of a block's rows, K in {8, 64, 256} (the vectorized kernels)
and K = 12 (the generic ones, which explain names); deterministic sums; CUDA-graph replay."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.plan.conv import saved_results

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")]


def _stage(shape, seed=0, special=False):
    """A BatchNormSaved as a completed forward leaves it, on CUDA, and dY, gamma; with the NumPy operands."""
    rng = np.random.default_rng(seed)
    k = shape[-1]
    c = (rng.standard_normal(shape) * 1.5 + 0.3).astype(np.float16)
    c64 = c.astype(np.float64).reshape(-1, k)
    mean = c64.mean(axis=0).astype(np.float32)
    inv_var = (1 / np.sqrt(c64.var(axis=0) + 1e-5)).astype(np.float32)
    bits = rng.random(c.size) > 0.45
    dy = rng.standard_normal(shape).astype(np.float16)
    if special:                         # inf / NaN in dY behind a closed ReLU: relu's gradient there is 0
        closed = np.flatnonzero(~bits)[:6]
        dy.reshape(-1)[closed[:3]] = np.inf
        dy.reshape(-1)[closed[3:]] = np.nan
    gamma = rng.uniform(0.5, 2, k).astype(np.float32)
    saved = lt.BatchNormSaved()
    cuda = lambda a: lt.asarray(a, device="cuda")       # noqa: E731
    saved.conv_out, saved.saved_mean, saved.saved_inv_var = cuda(c), cuda(mean), cuda(inv_var)
    saved.relu_mask = cuda(np.packbits(bits, bitorder="little"))
    saved_results.mark([t.data for t in (saved.conv_out, saved.saved_mean, saved.saved_inv_var, saved.relu_mask)])
    return saved, cuda(dy), cuda(gamma), dict(c=c, mean=mean, inv_var=inv_var, bits=bits.reshape(shape), dy=dy,
                                              gamma=gamma)


def _reference(o, relu):
    k = o["c"].shape[-1]
    g = np.where(o["bits"], o["dy"].astype(np.float64), 0.0) if relu else o["dy"].astype(np.float64)
    x_hat = (o["c"].astype(np.float64) - o["mean"]) * o["inv_var"].astype(np.float64)
    axes = tuple(range(g.ndim - 1))
    n = g.size // k
    dbeta, dgamma = g.sum(axis=axes), (g * x_hat).sum(axis=axes)
    d_conv = o["gamma"] * o["inv_var"].astype(np.float64) * (g - dbeta / n - x_hat * dgamma / n)
    return d_conv, dgamma, dbeta, g


def _close(got, want, what, rel):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = float(np.abs(want).max()) or 1.0
    err = float(np.abs(got - want).max())
    assert err <= rel * scale, f"{what}: max |error| {err:.3g} against max |reference| {scale:.3g}"


@pytest.mark.parametrize("form", ["relu", "residual", "bn"])
@pytest.mark.parametrize("shape", [(3, 7, 9, 8), (2, 5, 11, 64), (3, 3, 7, 256), (1, 1, 1, 64), (2, 7, 5, 12)],
                         ids=lambda s: "x".join(map(str, s)))
def test_stage_one_on_cuda(shape, form):
    # N*P*Q = 189, 110, 63, 1, 70: never a multiple of a block's rows (32, 32, 8, 32)
    relu, residual = form != "bn", form == "residual"
    saved, dy, gamma, o = _stage(shape, seed=sum(shape), special=relu)
    d_conv, dgamma, dbeta, d_skip = lt.cbr_bn_backward(dy, saved, gamma, relu=relu, residual=residual)
    text = str(lt.explain(d_conv))
    if shape[-1] % 8 == 0:
        assert "DbnSums on cuda" in text and "DbnDx on cuda" in text, text
        assert "FusedReduction" not in text and text.count("DbnSums") == 1, text
    else:
        assert "generic dBN kernels: the vectorized dBN kernels take K a multiple of 8 channels; K = 12" in text, text
    want_dx, want_dgamma, want_dbeta, want_skip = _reference(o, relu)
    got = lt.evaluate(d_conv, dgamma, dbeta, *((d_skip,) if residual else ()))
    _close(got[0].numpy(), want_dx, "d(conv_out)", 4e-3)
    _close(got[1].numpy(), want_dgamma, "dgamma", 1e-4)
    _close(got[2].numpy(), want_dbeta, "dbeta", 1e-4)
    if residual:
        if shape[-1] % 8 == 0:
            text = str(lt.explain(lt.cbr_bn_backward(dy, saved, gamma, residual=True)[3]))
            assert "writes d(skip)" in text and "Drelu on cuda" not in text, text   # by the sums' pass
        want = np.where(o["bits"], o["dy"], np.float16(0))
        assert (got[3].numpy().view(np.uint16) == want.view(np.uint16)).all()       # bit for bit, +0 where closed


@pytest.mark.parametrize("shape", [(128, 56, 56, 64), (64, 28, 28, 128)], ids=["56x56x64", "28x28x128"])
def test_large_stage_one_on_cuda_is_deterministic(shape):
    # many blocks and rows per thread: the float32 partials, the float64 finish; bit-identical on a rerun
    saved, dy, gamma, o = _stage(shape, seed=7)
    runs = []
    for _ in range(2):
        d_conv, dgamma, dbeta, _ = lt.cbr_bn_backward(dy, saved, gamma)
        runs.append([t.numpy() for t in lt.evaluate(d_conv, dgamma, dbeta)])
    want_dx, want_dgamma, want_dbeta, _ = _reference(o, True)
    _close(runs[0][0], want_dx, "d(conv_out)", 4e-3)
    _close(runs[0][1], want_dgamma, "dgamma", 1e-4)
    _close(runs[0][2], want_dbeta, "dbeta", 1e-4)
    for a, b in zip(*runs):
        assert (a.view(np.uint8) == b.view(np.uint8)).all()


def test_stage_one_replays_as_a_cuda_graph():
    saved, dy, gamma, o = _stage((4, 9, 9, 64), seed=3)
    out = lt.empty((4, 9, 9, 64), np.float16, device="cuda")
    want_dx = _reference(o, True)[0]
    for _ in range(4):                  # the third call captures, the later ones replay
        out[...] = lt.cbr_bn_backward(dy, saved, gamma)[0]
        _close(out.numpy(), want_dx, "d(conv_out)", 4e-3)
    text = str(lt.explain(lt.cbr_bn_backward(dy, saved, gamma)[0], out))
    assert "CUDA graph replay: the third call" in text and "0 captured" not in text and " 0 replays" not in text, text
