"""The fused CBR path (relu(batch_norm(conv2d(x, w)))) against the same ops run one at a time
(the unfused path: conv2d evaluated alone, batch_norm on that Tensor, then relu, each evaluated
separately) and against a float64 oracle (cbr.conv_reference + cbr.batchnorm_reference), on shapes
drawn by hypothesis: y, saved_mean, saved_inv_var, the running statistics (updated in place,
cuDNN-style momentum, unbiased running variance) and the ReLU mask, in training and inference.

CPU cases run in CI (float32, and float16 storage); the same tests run on CUDA with float16
activations and weights and C, K multiples of 8 under `pytest -m gpu` (skipped without a device).

Tolerances are derived, not guessed (see `Bounds`): every quantity gets a bound built from
  u      the unit roundoff of the storage dtype (2^-24 float32, 2^-11 float16): the conv output
         and y are stored in it, so each is rounded once;
  acc    float32 accumulation of the R*S*C products of one conv output (BLAS on the CPU, tensor
         cores accumulating in float32 on CUDA): at most R*S*C * 2^-24 * sum|x||w| (the classic
         worst-case bound; the real error is far smaller);
then propagated through the BN formulas to first order, with a safety factor of 2.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lazytensor as lt
from tests.support.devices import cudnn_ready
from lazytensor.cbr.batchnorm_reference import batchnorm_train_reference
from lazytensor.cbr.conv_args import conv_output_shape
from lazytensor.cbr.conv_reference import conv2d_nhwc_reference


CUDA = pytest.param("cuda", marks=[pytest.mark.gpu,
                                   pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and cuDNN")])
F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
# (device, storage dtype): on CUDA in float16 and in strict float32 (the suite's TF32 setting, off)
CONFIGS = [pytest.param("cpu", F32, id="cpu-float32"), pytest.param("cpu", F16, id="cpu-float16"),
           pytest.param(*CUDA.values, F16, marks=CUDA.marks, id="cuda-float16"),
           pytest.param(*CUDA.values, F32, marks=CUDA.marks, id="cuda-float32")]
MODES = [pytest.param(True, id="train"), pytest.param(False, id="eval")]

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
U32 = 2.0 ** -24


def unit_roundoff(dtype) -> float:
    return 2.0 ** -24 if np.dtype(dtype) == F32 else 2.0 ** -11


# -- drawn cases ---------------------------------------------------------------------------------

@st.composite
def conv_cases(draw, device="cpu", training=True):
    """Small conv problems (N, H, W, C, K, R, S, stride, padding, dilation) with a non-empty output,
    and more than one value per channel in training."""
    if device == "cuda":
        c, k = draw(st.sampled_from([8, 16])), draw(st.sampled_from([8, 16]))
    else:
        c, k = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    n = draw(st.integers(1, 3))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers(max(1, dilation[0] * (r - 1) + 1 - 2 * padding[0]), 8))
    w = draw(st.integers(max(1, dilation[1] * (s - 1) + 1 - 2 * padding[1]), 8))
    _, p, q, _ = conv_output_shape((n, h, w, c), (k, r, s, c), stride, padding, dilation)
    if training and n * p * q < 2:
        n = 2
    return dict(x_shape=(n, h, w, c), w_shape=(k, r, s, c), stride=stride, padding=padding,
                dilation=dilation, momentum=draw(st.sampled_from([0.1, 0.3])),
                eps=draw(st.sampled_from([1e-5, 1e-3])), seed=draw(st.integers(0, 2 ** 31 - 1)))


def operands(case, dtype):
    """x with a per-channel offset (so the batch mean is not ~0), He-scaled weights, gammas of
    both signs, and running statistics that are not the (0, 1) defaults: never zeros."""
    rng = np.random.default_rng(case["seed"])
    n, h, w, c = case["x_shape"]
    k, r, s, _ = case["w_shape"]
    x = (rng.standard_normal((n, h, w, c)) + rng.uniform(-1, 1, c)).astype(dtype)
    wt = (rng.standard_normal((k, r, s, c)) / math.sqrt(r * s * c)).astype(dtype)
    gamma = (rng.uniform(0.5, 1.5, k) * rng.choice([-1.0, 1.0], k)).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, k).astype(np.float32)
    rm = rng.uniform(-0.5, 0.5, k).astype(np.float32)
    rv = rng.uniform(0.5, 2.0, k).astype(np.float32)
    return x, wt, gamma, beta, rm, rv


def to_device(arrays, device):
    """Tensors holding copies: lt.asarray shares a NumPy array's memory on the CPU, and the running
    statistics are updated in place, so the NumPy originals must stay as they were."""
    return [lt.asarray(a.copy(), device=device) for a in arrays]


def conv_kwargs(case):
    return dict(stride=case["stride"], padding=case["padding"], dilation=case["dilation"])


def mask_of(y: np.ndarray) -> np.ndarray:
    return np.packbits(y.ravel() > 0, bitorder="little")


# -- the oracle and its bounds -------------------------------------------------------------------

class Bounds:
    """The float64 reference of relu(batch_norm(conv2d(x, w))) for x, w as stored, and first-order
    error bounds for what lazytensor may return (see the module docstring)."""

    def __init__(self, x, w, gamma, beta, rm, rv, case, training, dtype, device="cpu"):
        kw = conv_kwargs(case)
        u = unit_roundoff(dtype)
        self.conv = conv2d_nhwc_reference(x, w, **kw)
        absconv = conv2d_nhwc_reference(np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)), **kw)
        rsc = int(np.prod(w.shape[1:]))
        # per element: one rounding to storage + float32 accumulation of R*S*C products
        self.conv_err = u * np.abs(self.conv) + rsc * U32 * absconv
        g = gamma.astype(np.float64)
        eps, mom = case["eps"], case["momentum"]
        axes = tuple(range(3))
        c = self.conv
        if training:
            ref = batchnorm_train_reference(c, gamma, beta, rm, rv, momentum=mom, eps=eps)
            self.bn = ref.y
            mean, var = c.mean(axis=axes), c.var(axis=axes)
            count = c.size // c.shape[-1]
            self.saved_mean, self.saved_inv_var = mean, 1.0 / np.sqrt(var + eps)
            self.running_mean = (1 - mom) * rm.astype(np.float64) + mom * mean
            self.running_var = (1 - mom) * rv.astype(np.float64) + mom * var * count / (count - 1)
            e_mean = self.conv_err.max(axis=axes) + 4 * U32 * np.abs(c).max(axis=axes)
            dev = np.abs(c - mean).max(axis=axes)
            # var = mean((c - m)^2): d var <= 2 max|c - m| e + e^2; on CUDA the genstats path forms
            # E[c^2] - m^2 from float32 sums, which loses about n * 2^-24 * E[c^2].
            e_var = 2 * dev * e_mean + e_mean ** 2 + 4 * U32 * var
            if device == "cuda":
                e_var = e_var + 4 * count * U32 * (c * c).mean(axis=axes)
            inv = self.saved_inv_var
            rel_inv = 0.5 * e_var / (var + eps) + 4 * U32
            self.e_mean, self.e_inv = e_mean, rel_inv * inv
            self.e_rm = mom * e_mean + 4 * U32 * np.abs(self.running_mean)
            self.e_rv = mom * e_var * count / (count - 1) + 4 * U32 * np.abs(self.running_var)
            # y = (c - m) * inv * g + b, computed as c * eq_scale + eq_bias in float32
            e_bn = (np.abs(g * inv) * (self.conv_err + e_mean) + np.abs(g * (c - mean) * inv) * rel_inv
                    + 8 * U32 * np.abs(g * inv) * (np.abs(c) + np.abs(mean)) + 4 * U32 * np.abs(beta))
        else:
            inv = 1.0 / np.sqrt(rv.astype(np.float64) + eps)
            self.bn = (c - rm.astype(np.float64)) * inv * g + beta.astype(np.float64)
            e_bn = (np.abs(g * inv) * self.conv_err + 8 * U32 * np.abs(g * inv) * (np.abs(c) + np.abs(rm))
                    + 4 * U32 * np.abs(beta))
        self.u = u
        self.apply_terms = np.abs(g * inv) * (np.abs(c) + np.abs(mean if training else rm)) + np.abs(beta)
        # the output is stored in `dtype` once more: one more rounding
        self.e_bn = 2 * (e_bn + u * np.abs(self.bn)) + 1e-7
        self.y = np.maximum(self.bn, 0.0)      # |relu(a) - relu(b)| <= |a - b|: e_bn serves y too

    def check_y(self, got, what):
        got = got.astype(np.float64)
        err = np.abs(got - self.y)
        bad = err > self.e_bn
        assert not bad.any(), (f"{what}: {bad.sum()} of {got.size} elements off, worst |error| "
                               f"{err.max():.3g} against bound {self.e_bn.ravel()[np.argmax(err)]:.3g}")

    def check_mask(self, mask, what):
        """The mask may differ from the reference's only where the reference is within its bound of 0."""
        bits = np.unpackbits(mask, bitorder="little", count=self.y.size).astype(bool)
        ref_bits = (self.bn > 0).ravel()
        undecided = (np.abs(self.bn) <= self.e_bn).ravel()
        assert not ((bits != ref_bits) & ~undecided).any(), f"{what}: ReLU mask bits differ where the sign is clear"

    def check_saved(self, saved, what):
        _close(saved.saved_mean.numpy(), self.saved_mean, 2 * self.e_mean, f"{what} saved_mean")
        _close(saved.saved_inv_var.numpy(), self.saved_inv_var, 2 * self.e_inv, f"{what} saved_inv_var")
        assert saved.saved_mean.dtype == F32 and saved.saved_inv_var.dtype == F32

    def check_running(self, rm, rv, what):
        _close(rm.numpy(), self.running_mean, 2 * self.e_rm, f"{what} running_mean")
        _close(rv.numpy(), self.running_var, 2 * self.e_rv, f"{what} running_var")


def _close(got, want, bound, what):
    err = np.abs(got.astype(np.float64) - want)
    assert (err <= bound + 1e-7).all(), f"{what}: |error| {err.max():.3g} over the bound {np.max(bound):.3g}"


def unfused_tolerance(bounds: Bounds, device: str) -> np.ndarray:
    """Fused against unfused. On the CPU both run the same conv, the same statistics reduction and
    the same finalize; at most the order of partial sums may differ, which moves the float32
    statistics and eq_scale/eq_bias by a few ulps: a few ulps of |c * eq_scale| + |eq_bias| in the
    float32 apply, then one rounding to storage that may fall either side.
    On CUDA the fused stage 1 may be conv + genstats (float32 sums) while the unfused batch_norm
    reads the stored conv output: each side is within the oracle's bound, so twice that."""
    if device == "cuda":
        return 2 * bounds.e_bn
    return 16 * U32 * bounds.apply_terms + 2 * bounds.u * np.abs(bounds.bn) + 1e-7


# -- fused vs unfused vs oracle, drawn shapes ----------------------------------------------------

def run_fused(x, w, vecs, case, training, device):
    g, b, rm, rv = vecs
    saved = lt.BatchNormSaved()
    expr = lt.relu(lt.batch_norm(lt.conv2d(x, w, **conv_kwargs(case)), g, b, rm, rv, training=training,
                                 momentum=case["momentum"], eps=case["eps"], saved=saved))
    return lt.evaluate(expr), saved


def run_unfused(x, w, vecs, case, training):
    g, b, rm, rv = vecs
    saved = lt.BatchNormSaved()
    conv = lt.evaluate(lt.conv2d(x, w, **conv_kwargs(case)))
    bn = lt.evaluate(lt.batch_norm(conv, g, b, rm, rv, training=training, momentum=case["momentum"],
                                   eps=case["eps"], saved=saved))
    return lt.evaluate(lt.relu(bn)), saved


@pytest.mark.parametrize("training", MODES)
@pytest.mark.parametrize("device, dtype", CONFIGS)
@SETTINGS
@given(data=st.data())
def test_fused_matches_unfused_and_reference(device, dtype, training, data):
    case = data.draw(conv_cases(device, training), label="case")
    x_np, w_np, g_np, b_np, rm_np, rv_np = operands(case, dtype)
    oracle = Bounds(x_np, w_np, g_np, b_np, rm_np, rv_np, case, training, dtype, device)
    x, w = to_device([x_np, w_np], device)
    fused_vecs = to_device([g_np, b_np, rm_np, rv_np], device)
    unfused_vecs = to_device([g_np, b_np, rm_np, rv_np], device)   # their own running statistics

    y, saved = run_fused(x, w, fused_vecs, case, training, device)
    y_un, saved_un = run_unfused(x, w, unfused_vecs, case, training)
    assert y.dtype == dtype and y.shape == oracle.y.shape and y.device == device
    y_np, y_un_np = y.numpy(), y_un.numpy()

    oracle.check_y(y_np, "fused y")
    oracle.check_y(y_un_np, "unfused y")
    tol = unfused_tolerance(oracle, device)
    diff = np.abs(y_np.astype(np.float64) - y_un_np)
    assert (diff <= tol).all(), f"fused vs unfused: max |diff| {diff.max():.3g}"

    if training:
        oracle.check_saved(saved, "fused")
        oracle.check_saved(saved_un, "unfused")
        oracle.check_running(fused_vecs[2], fused_vecs[3], "fused")
        oracle.check_running(unfused_vecs[2], unfused_vecs[3], "unfused")
        assert saved.relu_mask is not None and saved.relu_mask.dtype == np.uint8
        mask = saved.relu_mask.numpy()
        assert mask.shape == ((y_np.size + 7) // 8,)
        assert np.array_equal(mask, mask_of(y_np)), "the mask is not (y > 0) of the y it came with"
        oracle.check_mask(mask, "fused")
        undecided = (np.abs(y_un_np.astype(np.float64)) <= tol).ravel()
        bits = np.unpackbits(mask, bitorder="little", count=y_np.size).astype(bool)
        assert not ((bits != (y_un_np.ravel() > 0)) & ~undecided).any(), "fused mask vs unfused y"
    else:
        for vecs in (fused_vecs, unfused_vecs):    # inference reads the running statistics only
            assert np.array_equal(vecs[2].numpy(), rm_np) and np.array_equal(vecs[3].numpy(), rv_np)
        assert saved.saved_mean is None and saved.relu_mask is None


# -- the residual block: relu(batch_norm(conv2d(x, w)) + skip) -----------------------------------

def plan_lines(expr) -> list[str]:
    return [line for line in lt.explain(expr, source=False).splitlines() if line.startswith("[")]


@pytest.mark.parametrize("device, dtype", CONFIGS)
def test_residual_is_conv_stats_finalize_and_one_elementwise_kernel(device, dtype):
    case = dict(x_shape=(2, 7, 6, 8), w_shape=(8, 3, 3, 8), stride=(1, 1), padding=(1, 1), dilation=(1, 1),
                momentum=0.1, eps=1e-5, seed=5)
    x_np, w_np, g_np, b_np, rm_np, rv_np = operands(case, dtype)
    skip_np = np.random.default_rng(6).standard_normal((2, 7, 6, 8)).astype(dtype)
    oracle = Bounds(x_np, w_np, g_np, b_np, rm_np, rv_np, case, True, dtype, device)
    x, w, skip, g, b, rm, rv = to_device([x_np, w_np, skip_np, g_np, b_np, rm_np, rv_np], device)
    saved = lt.BatchNormSaved()
    expr = lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), g, b, rm, rv, saved=saved) + skip)

    steps = plan_lines(expr)
    assert steps[0].split()[1].startswith("Conv2d"), steps
    assert any("BatchNormFinalize" in s for s in steps), steps
    elementwise = [s for s in steps if "FusedElementwise" in s]
    # the running statistics are staged before the finalize and committed after the last kernel
    kernels = [s for s in steps if "Commit:" not in s]
    assert len(elementwise) == 1 and elementwise[0] is kernels[-1], steps
    assert "Commit: the updated running_mean" in steps[-1], steps
    assert "ReLU mask" in elementwise[0]
    if device == "cpu":   # conv, statistics reduction, finalize, apply + add + relu + mask
        assert len(kernels) == 4, steps

    with lt.profile() as prof:
        y = lt.evaluate(expr)
    kinds = [k.kind for k in prof.kernels]
    assert kinds.count("elementwise") == 1, prof

    # relu(bn + skip): the add is in float32 when y is float32, and in float16 storage after the
    # rounding of bn to float16: one more rounding of |bn| + |skip| to the bound.
    want = np.maximum(oracle.bn + skip_np.astype(np.float64), 0)
    bound = oracle.e_bn + 2 * oracle.u * (np.abs(oracle.bn) + np.abs(skip_np.astype(np.float64)))
    got = y.numpy()
    assert (np.abs(got.astype(np.float64) - want) <= bound).all()
    assert np.array_equal(saved.relu_mask.numpy(), mask_of(got))
    oracle.check_saved(saved, "residual")
    oracle.check_running(rm, rv, "residual")


# -- conv2d -> relu, conv2d -> batch_norm, conv2d alone ------------------------------------------

@pytest.mark.parametrize("device, dtype", CONFIGS)
@SETTINGS
@given(data=st.data())
def test_conv_relu(device, dtype, data):
    case = data.draw(conv_cases(device, training=False), label="case")
    x_np, w_np, *_ = operands(case, dtype)
    x, w = to_device([x_np, w_np], device)
    ref = conv2d_nhwc_reference(x_np, w_np, **conv_kwargs(case))
    rsc = int(np.prod(w_np.shape[1:]))
    absconv = conv2d_nhwc_reference(np.abs(x_np.astype(np.float64)), np.abs(w_np.astype(np.float64)),
                                    **conv_kwargs(case))
    bound = 2 * (unit_roundoff(dtype) * np.abs(ref) + rsc * U32 * absconv) + 1e-7

    conv = lt.evaluate(lt.conv2d(x, w, **conv_kwargs(case)))
    assert conv.dtype == dtype and conv.shape == ref.shape
    assert (np.abs(conv.numpy().astype(np.float64) - ref) <= bound).all()
    y = lt.evaluate(lt.relu(lt.conv2d(x, w, **conv_kwargs(case))))
    assert (np.abs(y.numpy().astype(np.float64) - np.maximum(ref, 0)) <= bound).all()
    # relu of the stored conv output, unfused, is the same numbers
    assert np.array_equal(y.numpy(), np.maximum(conv.numpy(), 0))


@pytest.mark.parametrize("training", MODES)
@pytest.mark.parametrize("device, dtype", CONFIGS)
@SETTINGS
@given(data=st.data())
def test_conv_batch_norm_without_relu(device, dtype, training, data):
    case = data.draw(conv_cases(device, training), label="case")
    x_np, w_np, g_np, b_np, rm_np, rv_np = operands(case, dtype)
    oracle = Bounds(x_np, w_np, g_np, b_np, rm_np, rv_np, case, training, dtype, device)
    x, w, g, b, rm, rv = to_device([x_np, w_np, g_np, b_np, rm_np, rv_np], device)
    saved = lt.BatchNormSaved()
    y = lt.evaluate(lt.batch_norm(lt.conv2d(x, w, **conv_kwargs(case)), g, b, rm, rv, training=training,
                                  momentum=case["momentum"], eps=case["eps"], saved=saved))
    err = np.abs(y.numpy().astype(np.float64) - oracle.bn)
    assert (err <= oracle.e_bn).all(), f"max |error| {err.max():.3g}"
    assert saved.relu_mask is None          # no relu consumed it: no mask
    if training:
        oracle.check_saved(saved, "conv+bn")
        oracle.check_running(rm, rv, "conv+bn")
    else:
        assert np.array_equal(rm.numpy(), rm_np) and np.array_equal(rv.numpy(), rv_np)


# -- the lt.cbr.CBR block ------------------------------------------------------------------------

@pytest.mark.parametrize("device, dtype", CONFIGS)
def test_cbr_block_train_then_eval(device, dtype):
    block = lt.cbr.CBR(8, 16, 3, stride=1, padding=1, momentum=0.2, dtype=dtype, device=device, seed=3)
    assert block.training and "train" in repr(block)
    rng = np.random.default_rng(4)
    x_np = (rng.standard_normal((2, 6, 5, 8)) + 0.5).astype(dtype)
    x = lt.asarray(x_np, device=device)
    w_np = block.weight.numpy()
    case = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), momentum=0.2, eps=block.eps)
    g_np, b_np = block.gamma.numpy(), block.beta.numpy()
    rm0, rv0 = block.running_mean.numpy().copy(), block.running_var.numpy().copy()

    train = Bounds(x_np, w_np, g_np, b_np, rm0, rv0, case, True, dtype, device)
    y = block(x)
    assert y.shape == (2, 6, 5, 16) and y.dtype == dtype
    train.check_y(y.numpy(), "CBR train")
    train.check_saved(block.saved, "CBR train")
    train.check_running(block.running_mean, block.running_var, "CBR train")
    assert np.array_equal(block.saved.relu_mask.numpy(), mask_of(y.numpy()))

    block.eval()
    assert not block.training and "eval" in repr(block)
    rm1, rv1 = block.running_mean.numpy().copy(), block.running_var.numpy().copy()
    infer = Bounds(x_np, w_np, g_np, b_np, rm1, rv1, case, False, dtype, device)
    y_eval = block(x)
    infer.check_y(y_eval.numpy(), "CBR eval")
    assert np.array_equal(block.running_mean.numpy(), rm1) and np.array_equal(block.running_var.numpy(), rv1)
    # the block's expression builds on: the eval output equals the expression assigned by hand
    out = lt.empty((2, 6, 5, 16), dtype, device)
    out[...] = block.expression(x)
    assert np.array_equal(out.numpy(), y_eval.numpy())


# -- the apply + ReLU + mask kernel on outputs large enough for the parallel CPU kernel ------------

@pytest.mark.parametrize("dtype", [F32, F16], ids=["float32", "float16"])
@pytest.mark.parametrize("x_shape, k", [((2, 64, 128, 8), 8),     # slices of a multiple of 8: parallel
                                        ((3, 61, 61, 7), 7)],     # 26047-element slices: the serial kernel
                         ids=["aligned-slices", "odd-slices"])
def test_mask_on_large_outputs(x_shape, k, dtype):
    """>= 2^17 elements take the multi-threaded CPU kernel, which writes the mask a slice at a time."""
    case = dict(x_shape=x_shape, w_shape=(k, 1, 1, x_shape[3]), stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                momentum=0.1, eps=1e-5, seed=11)
    x_np, w_np, g_np, b_np, rm_np, rv_np = operands(case, dtype)
    oracle = Bounds(x_np, w_np, g_np, b_np, rm_np, rv_np, case, True, dtype)
    y, saved = run_fused(*to_device([x_np, w_np], "cpu"), to_device([g_np, b_np, rm_np, rv_np], "cpu"),
                         case, True, "cpu")
    oracle.check_y(y.numpy(), "y")
    assert np.array_equal(saved.relu_mask.numpy(), mask_of(y.numpy()))
    oracle.check_mask(saved.relu_mask.numpy(), "large")


@pytest.mark.parametrize("device, dtype", CONFIGS)
def test_conv_alone_writes_the_destination_or_a_temporary_when_it_must(device, dtype):
    """As a plan's root, the conv writes a dense destination directly (one step), a strided one
    through a temporary and a copy, and one that is its own input through a temporary too."""
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((2, 6, 6, 8)).astype(dtype)
    ws = (rng.standard_normal((8, 3, 3, 8)) / 8).astype(dtype)
    x, w = lt.asarray(xs, device=device), lt.asarray(ws, device=device)
    want = lt.evaluate(lt.conv2d(x, w, padding=1)).numpy()
    dense = lt.empty((2, 6, 6, 8), dtype, device)
    assert lt.explain(lt.conv2d(x, w, padding=1), out=dense, source=False).count("\n[") == 1
    dense[...] = lt.conv2d(x, w, padding=1)
    np.testing.assert_array_equal(dense.numpy(), want)
    wide = lt.zeros((2, 6, 6, 16), dtype, device)
    wide[..., ::2] = lt.conv2d(x, w, padding=1)
    np.testing.assert_array_equal(wide.numpy()[..., ::2], want)
    assert not wide.numpy()[..., 1::2].any()
    x[...] = lt.conv2d(x, w, padding=1)              # reads a window around what it writes
    np.testing.assert_array_equal(x.numpy(), want)
