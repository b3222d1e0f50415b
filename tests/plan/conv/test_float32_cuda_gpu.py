"""float32 on CUDA through cuDNN and cuBLAS (GPU only): conv2d, dgrad and wgrad against NumPy in
float64; the CBR forward (training and inference) and its fused backward against a float64 reference;
TF32 off (strict float32, the suite's setting) and on, and what explain says of each; no host step in
a float32 training step; float64 convolutions where cuDNN offers them; a graph cuDNN rejects raises
and leaves the destination and the running statistics untouched, or with lt.config.allow_host runs
on the host with a warning. Measured errors are printed (pytest -rP shows them)."""
import warnings

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.cbr.conv_reference import conv2d_nhwc_reference
from tests.support.conv_grad_reference import dgrad_reference, wgrad_reference
from tests.support.devices import cudnn_ready

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and the cuDNN frontend")]

# Relative error bounds (max |error| / max |float64 reference|). Strict float32: a K-term dot product
# in float32 is within about sqrt(K) * 2^-24 of the exact one (K <= 300 here: 1e-6); BN's normalisation
# scales the conv's error by max|conv| / std(conv) (a few); the backward adds the dBN sums' cancellation.
STRICT = 1e-5
STRICT_BN = 2e-5
STRICT_BACKWARD = 5e-5
TF32 = 5e-3            # TF32 keeps 10 mantissa bits: 2^-11 per product

# (x NHWC, w KRSC, stride, padding, dilation): the CBR tests' shapes, a stride-2 block, a first layer
CASES = [
    ((2, 8, 8, 16), (32, 3, 3, 16), 1, 1, 1),
    ((3, 9, 11, 8), (16, 3, 3, 8), 2, 1, 1),
    ((2, 12, 10, 24), (8, 3, 3, 24), 1, 2, 2),
    ((4, 14, 14, 32), (64, 1, 1, 32), 2, 0, 1),
    ((1, 10, 7, 16), (16, 3, 1, 16), (1, 2), (1, 0), 1),
    ((4, 16, 16, 16), (32, 3, 3, 16), 2, 1, 1),
    ((4, 16, 16, 3), (16, 3, 3, 3), 1, 1, 1),           # 3 input channels (zero-padded to 8 for cuDNN)
]
IDS = ["3x3", "3x3-stride2", "3x3-dilation2", "1x1-stride2", "3x1-uneven", "block-stride2", "first-layer-C3"]
CBR_CASES = [((2, 8, 8, 16), (16, 3, 3, 16), 1, 1), ((4, 7, 7, 32), (64, 3, 3, 32), 1, 1),
             ((2, 9, 9, 8), (8, 3, 3, 8), 2, 1), ((4, 16, 16, 3), (16, 3, 3, 3), 1, 1)]
CBR_IDS = ["3x3", "3x3-K64", "stride2", "first-layer-C3"]


@pytest.fixture
def strict():
    with lt.config.override(conv_allow_tf32=False, matmul_allow_tf32=False, allow_host=False):
        yield


def rel_err(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.abs(got - want).max()) / (float(np.abs(want).max()) or 1.0)


def check(what, got, want, bound):
    e = rel_err(got, want)
    print(f"MEASURED {what}: relative error {e:.3g} (bound {bound:g})")
    assert e <= bound, f"{what}: relative error {e:.3g} over {bound:g}"


def operands(x_shape, w_shape, stride, padding, dilation, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(dtype)
    y_shape = lt.conv2d(lt.asarray(x), lt.asarray(w), stride=stride, padding=padding, dilation=dilation).shape
    return x, w, rng.standard_normal(y_shape).astype(dtype)


def cuda(*arrays):
    return [lt.asarray(a, device="cuda") for a in arrays]


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation", CASES, ids=IDS)
def test_float32_conv_dgrad_wgrad_match_numpy_float64(strict, x_shape, w_shape, stride, padding, dilation):
    x, w, dy = operands(x_shape, w_shape, stride, padding, dilation)
    X, W, DY = cuda(x, w, dy)
    kw = dict(stride=stride, padding=padding, dilation=dilation)
    made = {"conv2d": lambda: lt.conv2d(X, W, **kw), "dgrad": lambda: lt.conv2d_backward_data(DY, W, x_shape, **kw),
            "wgrad": lambda: lt.conv2d_backward_filter(X, DY, w_shape, **kw)}
    x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
    want = {"conv2d": conv2d_nhwc_reference(x64, w64, stride, padding, dilation),
            "dgrad": dgrad_reference(dy64, w64, x_shape, stride, padding, dilation),
            "wgrad": wgrad_reference(x64, dy64, w_shape, stride, padding, dilation)}
    for name, make in made.items():
        value = lt.evaluate(make()).numpy()
        assert value.dtype == np.float32, name
        check(f"{name} {x_shape} * {w_shape}", value, want[name], STRICT)
        text = str(lt.explain(make(), source=False))      # a new expression: the evaluated one is a value now
        assert "on the host" not in text and "float32 (strict" in text, text


def test_tf32_is_a_switch_and_explain_says_which_math(strict):
    x, w, _ = operands((4, 16, 16, 32), (64, 3, 3, 32), 1, 1, 1)
    X, W = cuda(x, w)
    want = conv2d_nhwc_reference(x.astype(np.float64), w.astype(np.float64), 1, 1, 1)
    with lt.config.override(conv_allow_tf32=True):
        y = lt.evaluate(lt.conv2d(X, W, padding=1)).numpy()
        text = str(lt.explain(lt.conv2d(X, W, padding=1), source=True))
    check("conv2d with TF32 allowed", y, want, TF32)
    assert "TF32 tensor cores allowed" in text and "float32_tf32" in text, text
    y = lt.evaluate(lt.conv2d(X, W, padding=1)).numpy()
    check("conv2d strict after TF32", y, want, STRICT)      # the kept TF32 plan was dropped by the switch
    text = str(lt.explain(lt.conv2d(X, W, padding=1), source=True))
    assert "float32 (strict" in text and "float32_tf32" not in text, text


def _cbr(x, w, gamma, beta, rm, rv, stride, padding, training, saved=None):
    X, W, G, B = cuda(x, w, gamma, beta)
    return lt.relu(lt.batch_norm(lt.conv2d(X, W, stride=stride, padding=padding), G, B, rm, rv, training=training,
                                 saved=saved))


def _bn_operands(k, seed):
    rng = np.random.default_rng(seed)
    return (rng.uniform(0.5, 2, k).astype(np.float32), rng.standard_normal(k).astype(np.float32),
            rng.standard_normal(k).astype(np.float32) * 0.1, rng.uniform(0.5, 2, k).astype(np.float32))


@pytest.mark.parametrize("x_shape, w_shape, stride, padding", CBR_CASES, ids=CBR_IDS)
def test_float32_cbr_forward_training_against_float64(strict, x_shape, w_shape, stride, padding):
    x, w, _ = operands(x_shape, w_shape, stride, padding, 1, seed=1)
    k = w_shape[0]
    gamma, beta, rm0, rv0 = _bn_operands(k, 2)
    RM, RV = cuda(rm0.copy(), rv0.copy())
    saved = lt.BatchNormSaved()
    y = lt.evaluate(_cbr(x, w, gamma, beta, RM, RV, stride, padding, True, saved)).numpy()
    c = conv2d_nhwc_reference(x.astype(np.float64), w.astype(np.float64), stride, padding, 1)
    axes = (0, 1, 2)
    mean, var = c.mean(axis=axes), c.var(axis=axes)
    n = c.size // k
    check("CBR forward y", y, np.maximum((c - mean) / np.sqrt(var + 1e-5) * gamma + beta, 0), STRICT_BN)
    check("CBR forward conv_out", saved.conv_out.numpy(), c, STRICT)
    check("CBR forward saved_mean", saved.saved_mean.numpy(), mean, STRICT_BN)
    check("CBR forward saved_inv_var", saved.saved_inv_var.numpy(), 1 / np.sqrt(var + 1e-5), STRICT_BN)
    check("CBR running_mean", RM.numpy(), 0.9 * rm0 + 0.1 * mean, STRICT_BN)
    check("CBR running_var", RV.numpy(), 0.9 * rv0 + 0.1 * var * n / (n - 1), STRICT_BN)
    text = str(lt.explain(_cbr(x, w, gamma, beta, RM, RV, stride, padding, True), source=False))
    # float32 has no genstats engine: the statistics are lazytensor's reduction on the device, and explain
    # says why (the genstats refusal), or that the conv runs channel-padded (C=3: no genstats path at all)
    assert "on the host" not in text and "statistics reduction" in text and "float32 (strict" in text, text
    assert "genstats" in text or "cudnn-padded" in text, text


@pytest.mark.parametrize("x_shape, w_shape, stride, padding", CBR_CASES, ids=CBR_IDS)
def test_float32_cbr_inference_against_float64(strict, x_shape, w_shape, stride, padding):
    x, w, _ = operands(x_shape, w_shape, stride, padding, 1, seed=3)
    gamma, beta, rm0, rv0 = _bn_operands(w_shape[0], 4)
    RM, RV = cuda(rm0.copy(), rv0.copy())
    y = lt.evaluate(_cbr(x, w, gamma, beta, RM, RV, stride, padding, False)).numpy()
    c = conv2d_nhwc_reference(x.astype(np.float64), w.astype(np.float64), stride, padding, 1)
    check("CBR inference y", y, np.maximum((c - rm0) / np.sqrt(rv0.astype(np.float64) + 1e-5) * gamma + beta, 0),
          STRICT_BN)
    assert np.array_equal(RM.numpy(), rm0) and np.array_equal(RV.numpy(), rv0)
    text = str(lt.explain(_cbr(x, w, gamma, beta, RM, RV, stride, padding, False), source=False))
    assert "on the host" not in text, text


@pytest.mark.parametrize("form", ["relu", "residual", "bn"])
@pytest.mark.parametrize("x_shape, w_shape, stride, padding", CBR_CASES, ids=CBR_IDS)
def test_float32_cbr_backward_against_float64(strict, x_shape, w_shape, stride, padding, form):
    from lazytensor.autodiff.patterns import matching_pattern
    from lazytensor.core.expr import as_computed
    from tests.plan.conv.test_cbr_backward_gpu import forward, reference
    rng = np.random.default_rng(5)
    x, w, dy = operands(x_shape, w_shape, stride, padding, 1, seed=5)
    gamma, beta, _, _ = _bn_operands(w_shape[0], 6)
    skip = rng.standard_normal(dy.shape).astype(np.float32)
    root, saved, y, skip_t = forward(x, w, gamma, beta, skip, form, stride, padding)
    pattern = matching_pattern(root)
    assert pattern is not None and pattern.form == form
    grads = pattern.gradients(root, lt.asarray(dy, device="cuda"))
    want = reference(x.astype(np.float64), w.astype(np.float64), gamma, beta, skip, dy, y, saved, form, stride,
                     padding)
    root = as_computed(root)
    bn = root.args[0] if form == "relu" else root.args[0].args[0] if form == "residual" else root
    x_t, w_t = bn.args[0].args
    named = {"x": x_t, "w": w_t, "gamma": bn.args[1], "beta": bn.args[2]}
    if form == "residual":
        named["skip"] = skip_t
    text = str(lt.explain(grads[w_t], source=False))          # before the evaluation makes it a value
    assert "on the host" not in text, text
    for name, t in named.items():
        check(f"CBR backward ({form}) d{name} {x_shape}", lt.evaluate(grads[t]).numpy(), want[name], STRICT_BACKWARD)


def test_a_float32_training_step_has_no_host_step(strict):
    from tests.support.torch_training import lt_net
    model = lt_net("vgg", "cuda", np.float32)       # C=3 first layer, CBR blocks, max pooling, a Linear
    opt = lt.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    step = lt.train_step(model, lt.cross_entropy, opt)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(3):
        x = lt.asarray(rng.standard_normal((16, 8, 8, 3)).astype(np.float32), device="cuda")
        labels = lt.asarray(rng.integers(0, 10, 16), device="cuda")
        losses.append(float(step(x, labels).numpy()))
    assert all(np.isfinite(losses)), losses
    text = str(lt.explain(step, source=False, detail=True))
    assert "on the host" not in text and "runs on the host" not in text, text
    assert "float32 (strict" in text, text
    assert "cuDNN conv_wgrad graph" in text and "cuDNN conv_dgrad graph" in text, text


def test_float32_matmul_is_strict_unless_tf32_is_allowed(strict):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((64, 300)).astype(np.float32), rng.standard_normal((300, 48)).astype(np.float32)
    A, B = cuda(a, b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    check("matmul float32 strict", lt.evaluate(A @ B).numpy(), want, STRICT)
    assert "float32 (strict: CUBLAS_COMPUTE_32F" in str(lt.explain(A @ B, source=False))
    with lt.config.override(matmul_allow_tf32=True):
        check("matmul float32 TF32", lt.evaluate(A @ B).numpy(), want, TF32)
        assert "TF32 tensor cores" in str(lt.explain(A @ B, source=False))


def test_float64_convs_on_cudnn_where_it_offers_them(strict):
    x, w, dy = operands((2, 8, 8, 16), (16, 3, 3, 16), 1, 1, 1, dtype=np.float64, seed=8)
    X, W, DY = cuda(x, w, dy)
    try:
        y = lt.evaluate(lt.conv2d(X, W, padding=1)).numpy()
        dx = lt.evaluate(lt.conv2d_backward_data(DY, W, x.shape, padding=1)).numpy()
        dw = lt.evaluate(lt.conv2d_backward_filter(X, DY, w.shape, padding=1)).numpy()
    except lt.UnsupportedOnDevice as e:
        pytest.xfail(f"cuDNN offers no float64 engine for this conv here: {e}")
    check("conv2d float64", y, conv2d_nhwc_reference(x, w, 1, 1, 1), 1e-12)
    check("dgrad float64", dx, dgrad_reference(dy, w, x.shape, 1, 1, 1), 1e-12)
    check("wgrad float64", dw, wgrad_reference(x, dy, w.shape, 1, 1, 1), 1e-12)


def test_a_rejected_graph_raises_and_leaves_the_caller_untouched(strict, monkeypatch):
    from lazytensor.cbr import cudnn_conv
    from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
    from lazytensor.plan.conv.steps import Conv2dStep
    from lazytensor.kernels import config as config_module
    monkeypatch.setattr(Conv2dStep, "rejected", {})         # the test's rejection is forgotten after it
    monkeypatch.setattr(config_module, "_warned", set())     # and its warning is said here
    x, w, _ = operands((2, 6, 6, 8), (8, 3, 3, 8), 1, 1, 1, seed=9)
    gamma, beta, rm0, rv0 = _bn_operands(8, 10)
    RM, RV = cuda(rm0.copy(), rv0.copy())

    def rejected(x, w, *args, **kw):
        raise CudnnGraphRejected("conv", None, "no engine (refused by the test)")
    monkeypatch.setattr(cudnn_conv, "conv2d", rejected)
    out = lt.full((2, 6, 6, 8), 7.0, dtype=np.float32, device="cuda")
    with pytest.raises(lt.UnsupportedOnDevice, match=r"conv2d of x \(2, 6, 6, 8\) float32.*no engine \(refused by "
                                                     r"the test\).*lt.config.allow_host = True"):
        out[...] = _cbr(x, w, gamma, beta, RM, RV, 1, 1, True)
    assert np.all(out.numpy() == 7.0)
    assert np.array_equal(RM.numpy(), rm0) and np.array_equal(RV.numpy(), rv0)
    with lt.config.override(allow_host=True), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out[...] = _cbr(x, w, gamma, beta, RM, RV, 1, 1, True)
        text = str(lt.explain(_cbr(x, w, gamma, beta, RM, RV, 1, 1, True), source=False))
    assert any(issubclass(s.category, lt.HostFallbackWarning) for s in seen), [str(s.message) for s in seen]
    c = conv2d_nhwc_reference(x.astype(np.float64), w.astype(np.float64), 1, 1, 1)
    mean, var = c.mean(axis=(0, 1, 2)), c.var(axis=(0, 1, 2))
    check("CBR forward on the host", out.numpy(), np.maximum((c - mean) / np.sqrt(var + 1e-5) * gamma + beta, 0),
          STRICT_BN)
    assert "on the host (lt.config.allow_host)" in text, text


def test_float32_batch_norm_alone_and_pooling_stay_on_the_device(strict):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 8, 8, 16)).astype(np.float32)
    gamma, beta, rm0, rv0 = _bn_operands(16, 12)
    X, G, B, RM, RV = cuda(x, gamma, beta, rm0.copy(), rv0.copy())
    made = {"batch_norm": lambda: lt.batch_norm(X, G, B, RM, RV, training=False),
            "max_pool2d": lambda: lt.max_pool2d(X, 2), "avg_pool2d": lambda: lt.avg_pool2d(X, 2)}
    x64 = x.astype(np.float64)
    windows = x64.reshape(4, 4, 2, 4, 2, 16)
    want = {"batch_norm": (x64 - rm0) / np.sqrt(rv0.astype(np.float64) + 1e-5) * gamma + beta,
            "max_pool2d": windows.max(axis=(2, 4)), "avg_pool2d": windows.mean(axis=(2, 4))}
    for name, make in made.items():
        check(f"{name} float32", lt.evaluate(make()).numpy(), want[name], STRICT)
        text = str(lt.explain(make(), source=False))
        assert "on the host" not in text and "on cuda" in text, text


def test_the_plans_each_dtype_and_math_is_offered(strict):
    """The facts behind cbr/cudnn_dtypes.py, printed: per graph kind and dtype (float32 strict and
    TF32), the plans cuDNN offers, how many build under the numerical-note filter and the first that
    does (the engines' names for float64). Strict float32 must keep a plan for each convolution: the
    real path (cudnn_plans.first_buildable_plan, time_plans) walks every plan offered, and cuDNN's
    heuristics list the tensor-core engines that strict float32 bars first."""
    import cupy
    from lazytensor.cbr.conv_key import ConvKey
    from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
    from lazytensor.cbr.cudnn_graphs import GraphKind, build_conv_graph
    from lazytensor.cbr.cudnn_handle import bind_current_stream, handle_for_device
    handle = handle_for_device(cupy.cuda.Device().id)
    bind_current_stream(handle)
    built = {}
    for dtype, tf32 in (("float16", False), ("float32", False), ("float32", True), ("float64", False)):
        key = ConvKey.of((8, 28, 28, 64), (64, 3, 3, 64), dtype, 1, 1, 1, tf32)
        for kind in (GraphKind.CONV, GraphKind.CONV_DGRAD, GraphKind.CONV_WGRAD, GraphKind.CONV_GENSTATS,
                     GraphKind.CONV_SCALE_BIAS_RELU):
            what = f"{kind.value} {dtype}{' TF32' if tf32 else ''}"
            try:
                g = build_conv_graph(kind, key, handle)
            except CudnnGraphRejected as e:
                print(f"MEASURED plans of {what}: rejected ({e.reason[:160]})")
                continue
            names, first = [], None
            for i in range(g.plan_count):
                try:
                    g.build_plan(i)
                except Exception:  # noqa: BLE001 - barred by a note, or no engine for this shape
                    continue
                first = i if first is None else first
                names.append(g.plan_name(i))
            built[kind, dtype, tf32] = names
            print(f"MEASURED plans of {what}: {g.plan_count} offered, {len(names)} build, the first at index "
                  f"{first}" + (f": {names[:6]}" if dtype == "float64" else ""))
    for kind in (GraphKind.CONV, GraphKind.CONV_DGRAD, GraphKind.CONV_WGRAD):
        assert built.get((kind, "float32", False)), f"strict float32 {kind.value}: no plan builds"
        assert built.get((kind, "float16", False)), f"float16 {kind.value}: no plan builds"
