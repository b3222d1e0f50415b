"""No silent host fallback on CUDA, checked on the CPU with a backend that declares CUDA's capabilities:
a conv cuDNN cannot take raises UnsupportedOnDevice at the line building it (no cuDNN) or planning it,
naming the op, the reason and the fixes; a graph cuDNN rejects at the first run raises there, the
destination untouched; lt.config.allow_host plans the host step instead, and explain says so; a
float32 CBR forward plans the cuDNN conv and lazytensor's statistics reduction (no genstats engine in
float32) without timing, and explain names the math. The GPU side: tests/plan/conv/test_float32_cuda_gpu.py."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.cbr import cudnn_conv, cudnn_conv_backward, cudnn_support
from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
from lazytensor.kernels import config as config_module
from lazytensor.ops.conv_bn import ConvAttrs
from lazytensor.plan.conv import cbr as cbr_plan
from lazytensor.plan.conv.steps import Conv2dStep, ConvBackwardStep
from lazytensor.plan.planner import plan
from tests.plan.conv.test_cbr_backward_cuda_cpu import _CpuWithCudaCapabilities
from tests.support.cuda_stand_in import device_tensor


@pytest.fixture
def no_cudnn(monkeypatch):
    monkeypatch.setattr(cudnn_support, "cudnn_unavailable_reason", lambda: "no CUDA device (the test's)")
    monkeypatch.setattr(config_module, "_warned", set())


@pytest.fixture
def cudnn_there(monkeypatch):
    monkeypatch.setattr(cudnn_support, "cudnn_unavailable_reason", lambda: None)


def _operands(x_shape=(2, 6, 6, 8), w_shape=(8, 3, 3, 8), dtype=np.float32):
    rng = np.random.default_rng(0)
    return rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)


def _plan(expr):
    return plan(expr, np.empty(expr.shape, expr.dtype), _CpuWithCudaCapabilities())


def test_a_cuda_conv_without_cudnn_raises_at_the_line_building_it(no_cudnn):
    x, w = (device_tensor(a) for a in _operands())
    with pytest.raises(lt.UnsupportedOnDevice, match=r"conv2d of x \(2, 6, 6, 8\) float32 by w \(8, 3, 3, 8\) cannot "
                                                     r"run on the GPU: cuDNN cannot take it: no CUDA device \(the "
                                                     r"test's\)\. To fix: install the 'cuda' extra.*"
                                                     r"lt.config.allow_host = True"):
        lt.conv2d(x, w, padding=1)
    dy = device_tensor(np.zeros((2, 6, 6, 8), np.float32))
    with pytest.raises(lt.UnsupportedOnDevice, match="conv2d_backward_data of x"):
        lt.conv2d_backward_data(dy, w, (2, 6, 6, 8), padding=1)
    with pytest.raises(lt.UnsupportedOnDevice, match="conv2d_backward_filter of x"):
        lt.conv2d_backward_filter(x, dy, (8, 3, 3, 8), padding=1)
    with lt.config.override(allow_host=True):
        assert lt.conv2d(x, w, padding=1).shape == (2, 6, 6, 8)      # planned on the host, with a warning
    cpu_x = lt.asarray(_operands()[0])                                # a CPU tensor: no question
    assert lt.conv2d(cpu_x, lt.asarray(_operands()[1]), padding=1).shape == (2, 6, 6, 8)


@pytest.mark.parametrize("kind", ["forward", "dgrad", "wgrad"])
def test_planning_a_conv_cudnn_cannot_take_raises_unless_host_is_allowed(no_cudnn, kind):
    x, w = (lt.asarray(a) for a in _operands())
    dy = lt.asarray(np.zeros((2, 6, 6, 8), np.float32))
    expr = {"forward": lambda: lt.conv2d(x, w, padding=1),
            "dgrad": lambda: lt.conv2d_backward_data(dy, w, (2, 6, 6, 8), padding=1),
            "wgrad": lambda: lt.conv2d_backward_filter(x, dy, (8, 3, 3, 8), padding=1)}[kind]
    op = "conv2d of x" if kind == "forward" else f"the {kind} of the conv of x"
    with pytest.raises(lt.UnsupportedOnDevice, match=f"{op}.*no CUDA device .the test's.*install the 'cuda' extra"):
        _plan(expr())
    with lt.config.override(allow_host=True), pytest.warns(lt.HostFallbackWarning, match="runs on the host"):
        (step,) = _plan(expr())
    assert step.path == "host" and "on the host (lt.config.allow_host)" in step.describe(False), step.describe(False)
    assert step.capture_refusal() is not None


def test_a_float32_cbr_forward_takes_the_cudnn_conv_and_the_reduction(cudnn_there, monkeypatch):
    from lazytensor.plan.conv import stage1

    def never(*a, **k):
        raise AssertionError("float32 has no genstats engine: nothing to time")
    monkeypatch.setattr(cbr_plan, "choose_stage1", never)
    monkeypatch.setattr(stage1, "choose_stage1", never)
    x, w = (lt.asarray(a) for a in _operands())
    k = 8
    vectors = [lt.asarray(v) for v in (np.ones(k, np.float32), np.zeros(k, np.float32), np.zeros(k, np.float32),
                                       np.ones(k, np.float32))]
    steps = _plan(lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), *vectors)))
    names = [type(s).__name__ for s in steps]
    assert names == ["Conv2dStep", "FusedReduction", "FinalizeStep", "FusedElementwise", "CommitStep"], names
    conv = steps[0]
    assert conv.path == "cudnn" and not conv.tf32
    text = conv.describe(False)
    assert "cuDNN conv_fprop graph; math: float32 (strict: no TF32 engine" in text, text
    assert "no conv_fprop + genstats engine in float32 (only float16)" in text, text
    with lt.config.override(conv_allow_tf32=True):
        conv = _plan(lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), *vectors)))[0]
    assert conv.tf32 and "math: float32 (TF32 tensor cores allowed" in conv.describe(False)


def test_the_float16_cbr_forward_still_times_genstats(cudnn_there, monkeypatch):
    monkeypatch.setattr(cbr_plan, "choose_stage1", lambda *a: ("conv_fprop + genstats", "forced by the test"))
    x, w = (lt.asarray(a) for a in _operands(dtype=np.float16))
    k = 8
    vectors = [lt.asarray(v) for v in (np.ones(k, np.float32), np.zeros(k, np.float32), np.zeros(k, np.float32),
                                       np.ones(k, np.float32))]
    conv = _plan(lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), *vectors)))[0]
    assert conv.path == "cudnn-genstats" and "math: float16 (float32 accumulation)" in conv.describe(False)


def test_a_graph_cudnn_rejects_at_its_first_run_raises_and_writes_nothing(monkeypatch):
    monkeypatch.setattr(Conv2dStep, "rejected", {})
    monkeypatch.setattr(ConvBackwardStep, "rejected", {})
    monkeypatch.setattr(config_module, "_warned", set())

    def rejected(*a, **k):
        raise CudnnGraphRejected("conv", None, "no engine (the test's)")
    monkeypatch.setattr(cudnn_conv, "conv2d", rejected)
    monkeypatch.setattr(cudnn_conv_backward, "conv2d_dgrad", rejected)
    x, w = _operands()
    attrs = ConvAttrs((1, 1), (1, 1), (1, 1))
    backend = _CpuWithCudaCapabilities()
    out = np.full((2, 6, 6, 8), 7.0, np.float32)
    step = Conv2dStep(backend, x, w, attrs, out, "cudnn")
    for _ in range(2):          # the rejection is kept: the second run raises without asking cuDNN
        with pytest.raises(lt.UnsupportedOnDevice, match=r"conv2d of x .*cuDNN rejected the graph \(no engine "
                                                         r"\(the test's\)\).*cast the operands"):
            step.run()
    assert np.all(out == 7.0)
    assert "on the host (lt.config.allow_host): cuDNN rejected the graph" in step.describe(False)
    assert step.capture_refusal() == "the conv runs on the host"
    dx = np.full(x.shape, 7.0, np.float32)
    back = ConvBackwardStep(backend, "dgrad", out, w, x.shape, w.shape, attrs, dx, "cudnn")
    with pytest.raises(lt.UnsupportedOnDevice, match=r"the dgrad of the conv of x .*cuDNN rejected the conv_dgrad"):
        back.run()
    assert np.all(dx == 7.0)


@pytest.mark.parametrize("kind", ["dgrad", "wgrad"])
def test_the_backward_convs_name_their_math(cudnn_there, kind):
    x, w = (lt.asarray(a) for a in _operands())
    dy = lt.asarray(np.zeros((2, 6, 6, 8), np.float32))
    expr = (lambda: lt.conv2d_backward_data(dy, w, (2, 6, 6, 8), padding=1)) if kind == "dgrad" else (
        lambda: lt.conv2d_backward_filter(x, dy, (8, 3, 3, 8), padding=1))
    (step,) = _plan(expr())
    assert step.path == "cudnn" and not step.tf32
    assert f"cuDNN conv_{kind} graph; math: float32 (strict: no TF32 engine" in step.describe(False), step.describe(False)
    with lt.config.override(conv_allow_tf32=True):
        (step,) = _plan(expr())
    assert step.tf32 and "TF32 tensor cores allowed" in step.describe(False)


def test_a_cublas_matmul_names_its_math():
    rng = np.random.default_rng(1)
    a, b = (lt.asarray(rng.standard_normal(s).astype(np.float32)) for s in ((4, 6), (6, 5)))
    (step,) = _plan(a @ b)
    assert "cuBLAS GEMM" in step.describe(False) and "math: float32 (strict: CUBLAS_COMPUTE_32F" in step.describe(False)
    with lt.config.override(matmul_allow_tf32=True):
        assert "math: float32 (TF32 tensor cores: lt.config.matmul_allow_tf32)" in step.describe(False)
