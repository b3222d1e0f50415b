"""CPU-side checks of the fused CBR backward's CUDA pieces: the stage-1 kernels rendered as CUDA C and
compiled to PTX by NVRTC (float16 activations, K a multiple of 8 and not), and the cuDNN dbn_relu
graph description against a stand-in frontend that records the calls. They run on the H200 in
tests/plan/conv/test_cbr_backward_gpu.py (-m gpu)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.cbr import cudnn_dbn, cudnn_graphs
from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
from lazytensor.cbr.cudnn_graphs import GraphKind, build_conv_graph
from lazytensor.kernels.backend import backend_for
from lazytensor.plan.conv import saved_results
from lazytensor.plan.planner import plan
from lazytensor.plan.steps import FusedElementwise, FusedReduction
from tests.plan.conv.test_cbr_backward_graphs import FakeGraph, NotSupported, nhwc
from tests.support.cuda_stand_in import with_cuda_capabilities

F16 = np.dtype(np.float16)


def _holder(shape, dtype=F16, seed=0):
    """A BatchNormSaved as a completed forward leaves it (arrays marked written), without running one."""
    rng = np.random.default_rng(seed)
    k = shape[-1]
    saved = lt.BatchNormSaved()
    y = rng.standard_normal(shape).astype(dtype)
    saved.conv_out = lt.asarray(y)
    saved.saved_mean = lt.asarray(rng.standard_normal(k).astype(np.float32))
    saved.saved_inv_var = lt.asarray(rng.uniform(0.5, 2, k).astype(np.float32))
    saved.relu_mask = lt.asarray(np.packbits(rng.random(y.size) > 0.5, bitorder="little"))
    saved_results.mark([t.data for t in (saved.conv_out, saved.saved_mean, saved.saved_inv_var, saved.relu_mask)])
    return saved, lt.asarray(rng.standard_normal(shape).astype(dtype)), lt.asarray(rng.standard_normal(k).astype(np.float32))


def _steps(expr):
    return plan(expr, np.empty(expr.shape, expr.dtype), backend_for("cpu"))


@pytest.mark.parametrize("shape", [(4, 7, 7, 64), (2, 3, 5, 5)])
def test_stage_one_kernels_compile_for_cuda(shape):
    # the kernels the planner makes for float16 activations (the mask read as bytes over channel
    # groups for K = 64; unpacked first for K = 5), rendered as the CUDA backend would and compiled
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")
    from lazytensor.kernels.cuda.layout import plan_launch
    from lazytensor.kernels.cuda.render_cuda import render_cuda
    from tests.kernels.test_cuda_reduce_codegen import BLOCKS_PER_SM, SM_COUNT, _compile_together, _operands
    from lazytensor.kernels.cuda.reduce_layout import plan_finish, plan_reduction
    from lazytensor.kernels.cuda.nvrtc_check import compile_to_ptx
    from lazytensor.kernels.cuda.render_cuda_reduce import render_cuda_finish, render_cuda_reduce
    saved, dy, gamma = _holder(shape)
    d_conv, dgamma, _, d_skip = lt.cbr_bn_backward(dy, saved, gamma, residual=True)
    steps = _steps(d_conv) + _steps(d_skip)
    elementwise = [st for st in steps if isinstance(st, FusedElementwise)]
    reductions = [st for st in steps if isinstance(st, FusedReduction)]
    # K = 5: each node unpacks the mask itself (the sums, d(conv_out) and d(skip)): 3 more kernels
    assert len(reductions) == 1 and len(elementwise) == (2 if shape[-1] % 8 == 0 else 5)
    for st in elementwise + reductions:
        st._views()                     # the grid's views of the arrays, made on a step's first run
    for st in elementwise:
        out = st.out
        geometry = plan_launch(st.program, out.shape, out.strides, out.__array_interface__["data"][0],
                               _operands(st.inputs))
        src = render_cuda(st.program, geometry.layout)
        compile_to_ptx(src.source, name=src.name)
    (st,) = reductions
    geometry = plan_reduction(st.spec.in_shape, st.spec.axes, _operands(st.inputs),
                              [np.dtype(d).itemsize for d in st.program.input_dtypes()], SM_COUNT, BLOCKS_PER_SM)
    sources = [render_cuda_reduce(st.program, st.spec, geometry.layout)]
    sources += [render_cuda_finish(st.spec, plan_finish(geometry.K, chunks)[0]) for chunks in (64, 1024)]
    _compile_together(sources)


def test_dbn_graph_description(monkeypatch):
    log = []
    fake = SimpleNamespace(
        data_type=SimpleNamespace(HALF="HALF", FLOAT="FLOAT", BOOLEAN="BOOLEAN"),
        heur_mode=SimpleNamespace(A="A", FALLBACK="FALLBACK"),
        cudnnGraphNotSupportedError=NotSupported,
        pygraph=lambda **kw: DbnFakeGraph(log, **kw),
    )
    monkeypatch.setattr(cudnn_graphs, "import_cuda_modules", lambda: (None, fake))
    key = cudnn_dbn.dbn_key((2, 9, 11, 16))
    assert key.out_shape == (2, 9, 11, 16)
    g = build_conv_graph(GraphKind.DBN_RELU, key, handle="h")
    assert g.roles == ("dy", "mask", "y", "gamma", "mean", "inv_var", "dx", "dgamma", "dbeta")
    dy, mask, y, gamma, mean, inv_var, dx, dgamma, dbeta = (t.fields for t in g.graph.tensors)
    for t in (dy, mask, y):
        assert (t["dim"], t["stride"]) == nhwc(2, 16, 9, 11)
    assert mask["data_type"] == "BOOLEAN" and dy["data_type"] == y["data_type"] == "HALF"   # bit-packed mask
    for t in (gamma, mean, inv_var, dgamma, dbeta):
        assert (t["dim"], t["stride"]) == nhwc(1, 16, 1, 1) and t["data_type"] == "FLOAT"
    (_, scale), = [e for e in log if e[0] == "scale"]
    assert scale["input"].fields is dy and scale["scale"].fields is mask
    (_, bn), = [e for e in log if e[0] == "batchnorm_backward"]
    assert bn["input"].fields is y and bn["scale"].fields is gamma and bn["mean"].fields is mean
    assert bn["inv_variance"].fields is inv_var and bn["grad"].fields["name"] == "dym"
    assert dx["output"] is True and dx["data_type"] == "HALF" and (dx["dim"], dx["stride"]) == nhwc(2, 16, 9, 11)
    assert dgamma["output"] is True and dbeta["output"] is True
    assert [e[0] for e in log[-4:]] == ["validate", "build_operation_graph", "plans", "check_support"]


def test_dbn_graph_rejections(monkeypatch):
    fake = SimpleNamespace(data_type=SimpleNamespace(HALF="HALF", FLOAT="FLOAT", BOOLEAN="BOOLEAN"),
                           heur_mode=SimpleNamespace(A="A", FALLBACK="FALLBACK"),
                           cudnnGraphNotSupportedError=NotSupported, pygraph=lambda **kw: DbnFakeGraph([], **kw))
    monkeypatch.setattr(cudnn_graphs, "import_cuda_modules", lambda: (None, fake))

    def refuse(self):
        raise NotSupported("no engine for this dBN")
    monkeypatch.setattr(DbnFakeGraph, "check_support", refuse)
    with pytest.raises(CudnnGraphRejected, match="dbn_relu.*no engine for this dBN"):
        build_conv_graph(GraphKind.DBN_RELU, cudnn_dbn.dbn_key((2, 4, 4, 8)), handle="h")


class DbnFakeGraph(FakeGraph):
    def scale(self, **kw):
        self.log.append(("scale", kw))
        return self._tensor_unlisted(name="dym")

    def batchnorm_backward(self, **kw):
        self.log.append(("batchnorm_backward", kw))
        return self._tensor(name="dx"), self._tensor(name="dgamma"), self._tensor(name="dbeta")

    def _tensor_unlisted(self, **fields):
        from tests.plan.conv.test_cbr_backward_graphs import FakeTensor
        return FakeTensor(self.log, 100, **fields)


@pytest.fixture
def fake_gpu_timing(monkeypatch, tmp_path):
    """choose_dbn's measurements without a GPU: burst_ms returns what each candidate says it costs."""
    from lazytensor.kernels import timing
    from lazytensor.plan.conv import dbn_choice as cbr_dbn_choice, stage1 as cbr_stage1
    monkeypatch.setenv("LAZYTENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LAZYTENSOR_CBR_TUNE", raising=False)
    monkeypatch.setattr(cbr_stage1, "_device_name", lambda device_id: "FakeGPU")
    monkeypatch.setattr(timing, "burst_ms", lambda fn, **kw: fn())
    monkeypatch.setattr(cbr_dbn_choice._CHOICES, "memory", {})
    return cbr_dbn_choice


def test_the_dbn_choice_is_measured_once_and_kept(fake_gpu_timing):
    c = fake_gpu_timing
    calls = []

    def own():
        calls.append("own")
        return 0.2

    def graph():
        calls.append("graph")
        return 0.1
    choice, note = c.choose_dbn((2, 4, 4, 8), 0, own, graph)
    assert choice == c.CUDNN and "own kernels 0.200 ms" in note and "0.100 ms" in note
    assert c.choose_dbn((2, 4, 4, 8), 0, own, graph) == (choice, note) and calls == ["own", "graph"]
    c._CHOICES.memory.clear()                           # a new process: from the disk cache, not timed
    choice2, note2 = c.choose_dbn((2, 4, 4, 8), 0, own, graph)
    assert choice2 == c.CUDNN and note2.endswith("from the disk cache") and calls == ["own", "graph"]
    assert c.choose_dbn((2, 4, 4, 16), 0, lambda: 0.1, lambda: 0.3)[0] == c.OWN


def test_the_dbn_choice_untimed_or_rejected_takes_the_own_kernels(fake_gpu_timing, monkeypatch):
    c = fake_gpu_timing

    def rejected():
        raise CudnnGraphRejected("dbn_relu", cudnn_dbn.dbn_key((2, 4, 4, 8)), "no engine")
    choice, note = c.choose_dbn((2, 4, 4, 8), 0, lambda: 0.5, rejected)
    assert choice == c.OWN and "cuDNN rejected the dbn_relu graph: no engine" in note
    monkeypatch.setenv("LAZYTENSOR_CBR_TUNE", "0")
    assert c.choose_dbn((4, 4, 4, 8), 0, lambda: 1 / 0, lambda: 1 / 0) == (c.OWN, "LAZYTENSOR_CBR_TUNE=0: not timed")


@with_cuda_capabilities(graphs=False)       # (it has no capture)
class _CpuWithCudaCapabilities:
    """The CPU backend declaring the CUDA backend's name and capabilities: the CUDA planning branches
    of stage 1, run on the host."""
    name = "cuda"

    def __init__(self):
        self._cpu = backend_for("cpu")

    def __getattr__(self, item):
        return getattr(self._cpu, item)


@pytest.mark.parametrize("forced", ["own", "cudnn"])
def test_the_cuda_stage_one_plan_on_a_stand_in(forced, monkeypatch):
    # _build_dx_chosen and DbnGraphStep wired as on CUDA: the chosen path's steps, the same d(conv_out)
    from lazytensor.plan.conv import cbr_backward as cbr_backward_plan, dbn_choice as cbr_dbn_choice
    from lazytensor.plan.planner import cutter
    choice = cbr_dbn_choice.CUDNN if forced == "cudnn" else cbr_dbn_choice.OWN
    monkeypatch.setattr(cbr_dbn_choice, "choose_dbn", lambda *a: (choice, "forced by the test"))
    monkeypatch.setattr(cbr_backward_plan, "_cudnn_dbn_refusal", lambda node: None)
    # float64: the generic kernels (the vectorized ones take float16 and float32), which run on the stand-in
    saved, dy, gamma = _holder((2, 3, 3, 16), np.dtype(np.float64), seed=5)
    want = lt.evaluate(lt.cbr_bn_backward(dy, saved, gamma)[0]).numpy()

    def dbn_relu(dy, mask, y, gamma, mean, inv_var, *, dx, dgamma, dbeta):
        bits = np.unpackbits(mask, bitorder="little")[: y.size].reshape(y.shape).astype(bool)
        g = np.where(bits, dy, 0).astype(np.float64)
        x_hat = (y - mean) * inv_var
        n = y.size // y.shape[-1]
        dbeta[...], dgamma[...] = g.sum(axis=(0, 1, 2)), (g * x_hat).sum(axis=(0, 1, 2))
        dx[...] = gamma * inv_var * (g - dbeta / n - x_hat * dgamma / n)
    monkeypatch.setattr(cudnn_dbn, "dbn_relu", dbn_relu)
    monkeypatch.setattr(cudnn_dbn, "compiled_dbn_graph_for", lambda *a, **k: None)
    node = lt.cbr_bn_backward(dy, saved, gamma)[0]
    steps: list = []
    backend = _CpuWithCudaCapabilities()
    new_steps, result = cbr_backward_plan.build_dx(node, backend, cutter(steps, backend), None)
    names = [type(s).__name__ for s in steps + new_steps]
    # the sums are planned once, ahead of either path: dgamma and dbeta read them
    assert names == ["GridReduction", "DbnGraphStep" if forced == "cudnn" else "GridElementwise"], names
    assert "forced by the test" in "".join(s.describe(False) for s in new_steps)
    for s in steps + new_steps:
        s.run()
    np.testing.assert_allclose(result.numpy(), want, rtol=1e-4, atol=1e-5)
