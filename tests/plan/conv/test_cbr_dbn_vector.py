"""The vectorized dBN kernels of the CBR backward on CUDA (kernels/cuda/dbn.py), checked without
a GPU: their CUDA C compiles to PTX with NVRTC for every variant; a NumPy model of their thread and
index arithmetic (tests/support/dbn_emulator.py) gives float64's sums and d(conv_out) and dY * mask bit for
bit; and the plan on a CPU backend named "cuda" takes them where they apply (float16, K a multiple of
8), computes the dBN sums once, and says why not where they do not. On the H200:
tests/plan/conv/test_cbr_dbn_vector_gpu.py (-m gpu)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.kernels.cuda import dbn as cuda_dbn
from lazytensor.kernels.cuda.dbn import dbn_geometry, render_dbn
from lazytensor.ops import cbr_backward
from lazytensor.plan.conv.dbn_cuda import vector_refusal
from tests.support.dbn_emulator import emulate_drelu, emulate_dx, emulate_sums
from tests.plan.conv.test_cbr_backward_cuda_cpu import _CpuWithCudaCapabilities, _holder

F16 = np.dtype(np.float16)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("relu", [True, False], ids=["relu", "no_relu"])
def test_the_dbn_kernels_compile_to_ptx(relu, dtype):
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")
    from lazytensor.kernels.cuda.nvrtc_check import compile_to_ptx
    source = render_dbn(relu, dtype)
    ptx = compile_to_ptx(source.source, name=source.name)
    entries = re.findall(r"\.entry (\w+)\(", ptx)
    assert sorted(entries) == sorted(cuda_dbn.kernel_names(relu).values())
    # every access of the activations is 16 bytes: dY and x in the sums and dx kernels (two rows per
    # trip and a last row: 6 loads each; and dY in d(skip)) as 128-bit loads, d(conv_out) (3) and
    # d(skip) (1 in lt_dbn_drelu, 3 in the sums: the residual form writes it from the loads of dY the
    # sums made, no load more) as 128-bit stores; float32: two of each per 8 channels
    vectors = 2 if dtype == "float32" else 1
    assert len(re.findall(r"ld\.global\.nc\.v4\.[ubf]32", ptx)) == (12 + relu) * vectors
    assert len(re.findall(r"st\.global\.v4\.[ubf]32", ptx)) == (3 + 4 * relu) * vectors
    assert ("ld.global.nc.u8" in ptx) == relu      # the mask, a byte per 8 channels


@pytest.mark.parametrize("rows, k, sms", [(401408, 64, 132), (25088, 256, 132), (3211264, 64, 132), (7, 8, 132),
                                           (5, 4096, 132), (3, 24, 2), (1, 2056, 1)])
def test_the_launch_geometry(rows, k, sms):
    g = dbn_geometry(rows, k, sms)
    tx, ty, _ = g.block
    assert g.V == k // 8 and tx * ty <= cuda_dbn.BLOCK_THREADS and tx * g.sums_grid[1] >= g.V
    assert g.sums_grid[1] == g.dx_grid[1] and (g.sums_grid[1] - 1) * tx < g.V    # no empty column chunk
    for grid in (g.sums_grid, g.dx_grid):
        assert 1 <= grid[0] <= max(1, -(-rows // ty)) and grid[0] * grid[1] <= max(4 * sms, grid[1])
    assert g.sums_grid[0] <= 4 * sms and g.dx_grid[0] <= 3 * sms
    assert g.finish_grid[0] * 32 >= 2 * k and g.drelu_grid[0] >= 1
    with pytest.raises(ValueError, match="multiple of 8"):
        dbn_geometry(rows, k + 4, sms)


def _operands(rng, rows, k, special):
    dy = rng.standard_normal((rows, k)).astype(F16)
    x = (rng.standard_normal((rows, k)) * 2 + 0.5).astype(F16)
    bits = rng.random(rows * k) > 0.4
    if special:                     # inf and NaN behind a closed ReLU contribute 0, as relu's gradient
        closed = np.flatnonzero(~bits)[:4]
        dy.reshape(-1)[closed[:2]] = np.inf
        dy.reshape(-1)[closed[2:]] = np.nan
    mask = np.packbits(bits, bitorder="little")
    mean = x.astype(np.float64).mean(axis=0).astype(np.float32)
    inv_var = (1 / np.sqrt(x.astype(np.float64).var(axis=0) + 1e-5)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, k).astype(np.float32)
    return dy, x, bits.reshape(rows, k), mask, mean, inv_var, gamma


def _reference(dy, x, bits, mean, inv_var, gamma, relu):
    g = np.where(bits, dy.astype(np.float64), 0.0) if relu else dy.astype(np.float64)
    x_hat = (x.astype(np.float64) - mean) * inv_var.astype(np.float64)
    n = dy.shape[0]
    s0, s1 = g.sum(axis=0), (g * x_hat).sum(axis=0)
    return s0, s1, gamma * inv_var.astype(np.float64) * (g - s0 / n - x_hat * s1 / n), g


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 70), k=st.sampled_from([8, 16, 24, 64, 2056]), sms=st.integers(1, 3),
       relu=st.booleans(), special=st.booleans(), seed=st.integers(0, 2**16))
def test_the_kernels_index_math_emulated(rows, k, sms, relu, special, seed):
    # rows not a multiple of a block's rows, K past one block's 256 vectors (2056: two column chunks)
    rng = np.random.default_rng(seed)
    dy, x, bits, mask, mean, inv_var, gamma = _operands(rng, rows, k, special and relu)
    g = dbn_geometry(rows, k, sms)
    partial = np.full((g.partial_rows, 2, k), np.nan, np.float32)
    sums = np.full((k, 2), np.nan, np.float32)
    emulate_sums(g, dy, x, mask if relu else None, mean, inv_var, partial, sums)
    s0, s1, d_conv, dym = _reference(dy, x, bits, mean, inv_var, gamma, relu)
    scale = np.abs(dym).sum(axis=0) + 1
    assert np.all(np.abs(sums[:, 0] - s0) <= 1e-5 * scale)
    assert np.all(np.abs(sums[:, 1] - s1) <= 1e-4 * scale * (1 + np.abs(inv_var * (x - mean)).max()))
    out = np.full((rows, k), np.nan, F16)
    emulate_dx(g, dy, x, mask if relu else None, mean, inv_var, gamma, sums, out, rows)
    np.testing.assert_allclose(out.astype(np.float64), d_conv, rtol=2e-3, atol=2e-3 * (np.abs(d_conv).max() + 1e-3))
    if relu:
        want = np.where(bits, dy, np.float16(0))
        skip = np.full((rows, k), np.nan, F16)
        emulate_drelu(g, dy, mask, skip)
        assert (skip.view(np.uint16) == want.view(np.uint16)).all()     # bit for bit: +0 where closed
        skip = np.full((rows, k), np.nan, F16)                          # the same, written by the sums' pass
        emulate_sums(g, dy, x, mask, mean, inv_var, partial, sums, skip)
        assert (skip.view(np.uint16) == want.view(np.uint16)).all()


@pytest.fixture
def stand_in(monkeypatch):
    """The CPU backend with the CUDA backend's capabilities, the vectorized kernels' launches replaced by their NumPy model
    (on 2 SMs), plans made afresh (no recipe of a real backend's plan is reused, none is kept)."""
    from lazytensor.plan.conv import dbn_cuda as cbr_dbn_cuda
    from lazytensor.reuse import recipes
    monkeypatch.setattr(recipes, "_recipes", {})
    monkeypatch.setattr(cbr_dbn_cuda, "geometry_for", lambda backend, a, relu: dbn_geometry(
        int(np.prod(a.shape[:-1])), a.shape[-1], 2))
    monkeypatch.setattr(cuda_dbn, "dbn_sums", lambda compiler, *a: emulate_sums(*a))
    monkeypatch.setattr(cuda_dbn, "dbn_dx", lambda compiler, *a: emulate_dx(*a))
    monkeypatch.setattr(cuda_dbn, "dbn_drelu", lambda compiler, *a: emulate_drelu(*a))
    monkeypatch.setattr(_CpuWithCudaCapabilities, "compiler", None, raising=False)
    monkeypatch.setattr(cbr_backward, "sums_write_skip", lambda dy: vector_refusal(dy.dtype, dy.shape, ()) is None)
    return _CpuWithCudaCapabilities()


def _plan(expr, backend):
    """The steps of `expr` planned for `backend`, run. The recipes are the test's own (stand_in):
    emptied first, so that the CPU's plan of the same structure made for `want` is not rebound."""
    from lazytensor.reuse import recipes
    from lazytensor.plan.planner import plan
    recipes._recipes.clear()
    out = np.empty(expr.shape, expr.dtype)
    steps = plan(expr, out, backend)
    for s in steps:
        s.run()
    return steps, out


@pytest.mark.parametrize("dtype", [F16, np.dtype(lt.bfloat16), np.dtype(np.float32)],
                         ids=["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("relu, residual", [(True, False), (True, True), (False, False)],
                         ids=["relu", "residual", "no_relu"])
def test_the_plan_takes_the_vector_kernels(stand_in, relu, residual, dtype):
    saved, dy, gamma = _holder((3, 5, 7, 16), dtype, seed=3)  # 105 rows: not a multiple of a block's 16
    want = [lt.evaluate(e).numpy() for e in lt.cbr_bn_backward(dy, saved, gamma, relu=relu, residual=residual)
            if e is not None]
    d_conv, dgamma, dbeta, d_skip = lt.cbr_bn_backward(dy, saved, gamma, relu=relu, residual=residual)
    steps, got = _plan(d_conv, stand_in)
    assert [type(s).__name__ for s in steps] == ["DbnSumsStep", "DbnDxStep"], steps[0].describe(False)  # the sums once
    text = "\n".join(s.describe() for s in steps)
    assert "lt_dbn_sums_" in text and "lt_dbn_dx_" in text and ("mask bits" in text) == relu
    np.testing.assert_allclose(got.astype(np.float64), want[0], rtol=2e-3, atol=2e-3 * np.abs(want[0]).max())
    for e, w in zip((dgamma, dbeta), want[1:3]):
        steps, got = _plan(e, stand_in)
        assert [type(s).__name__ for s in steps] == ["DbnSumsStep", "FusedElementwise"]
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())
    if residual:
        # d(skip) is written by the sums' pass (its node is d(skip)'s operand), not by a kernel of its own
        steps, got = _plan(d_skip, stand_in)
        assert [type(s).__name__ for s in steps] == ["DbnSumsStep"]
        assert "writes d(skip)" in steps[0].describe(False)
        bits = np.uint32 if dtype == np.float32 else np.uint16
        assert (got.view(bits) == want[3].view(bits)).all()


def test_d_skip_is_written_by_the_sums_pass_in_a_plan_of_every_gradient(stand_in):
    # the residual form's gradients assigned together: one sums pass writes d(skip), no drelu kernel
    from lazytensor.reuse import recipes
    from lazytensor.plan.several import plan_several
    saved, dy, gamma = _holder((3, 5, 7, 16), seed=5)
    want = [lt.evaluate(e).numpy() for e in lt.cbr_bn_backward(dy, saved, gamma, residual=True)]
    for order in ([0, 1, 2, 3], [3, 2, 1, 0]):          # d(skip) planned first or last
        recipes._recipes.clear()
        grads = lt.cbr_bn_backward(dy, saved, gamma, residual=True)
        outs = [np.full(e.shape, np.nan, e.dtype) for e in grads]
        steps = plan_several([(outs[i], grads[i]) for i in order], stand_in)
        names = [type(s).__name__ for s in steps]
        assert names.count("DbnSumsStep") == 1 and "DreluStep" not in names, names
        for s in steps:
            s.run()
        assert (outs[3].view(np.uint16) == want[3].view(np.uint16)).all()
        np.testing.assert_allclose(outs[0].astype(np.float64), want[0], rtol=2e-3, atol=2e-3 * np.abs(want[0]).max())
        for got, w in zip(outs[1:3], want[1:3]):
            np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


@pytest.mark.parametrize("shape, dtype, why", [((2, 3, 3, 12), F16, "K = 12"),
                                               ((2, 3, 3, 16), np.dtype(np.float64), "not float64")])
def test_explain_says_why_the_generic_kernels_run(stand_in, shape, dtype, why):
    saved, dy, gamma = _holder(shape, dtype, seed=1)
    wants = [lt.evaluate(e).numpy() for e in lt.cbr_bn_backward(dy, saved, gamma, residual=True)[::3]]
    d_conv, _, _, d_skip = lt.cbr_bn_backward(dy, saved, gamma, residual=True)
    for e, want in zip((d_conv, d_skip), wants):
        steps, got = _plan(e, stand_in)
        names = {type(s).__name__ for s in steps}
        assert not names & {"DbnSumsStep", "DbnDxStep", "DreluStep"}
        assert "generic dBN kernels: the vectorized dBN kernels take" in steps[-1].describe(False)
        assert why in steps[-1].describe(False)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [F16, np.dtype(np.float32)])
def test_the_dbn_sums_run_once_where_cudnn_is_a_candidate(stand_in, monkeypatch, dtype):
    # the stage-1 choice (own kernels or cuDNN) planned the sums itself, and the planner had already
    # planned the sums node: two identical reductions per call (the H200 profile of 2026-11-30)
    from lazytensor.plan.conv import cbr_backward as cbr_backward_plan, dbn_choice as cbr_dbn_choice
    monkeypatch.setattr(cbr_backward_plan, "_cudnn_dbn_refusal", lambda node: None)
    monkeypatch.setattr(cbr_dbn_choice, "choose_dbn", lambda *a: (cbr_dbn_choice.OWN, "forced by the test"))
    saved, dy, gamma = _holder((2, 3, 5, 16), dtype, seed=2)
    want = lt.evaluate(lt.cbr_bn_backward(dy, saved, gamma)[0]).numpy()
    d_conv = lt.cbr_bn_backward(dy, saved, gamma)[0]
    steps, got = _plan(d_conv, stand_in)
    sums = [s for s in steps if "sum(dY')" in s.describe(False)]
    assert len(sums) == 1, [s.describe(False) for s in steps]
    assert "forced by the test" in steps[-1].describe(False)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3 * np.abs(want).max())



def test_a_remembered_cudnn_rejection_keeps_no_callers_arrays_alive(monkeypatch):
    # The cache kept the exception, whose traceback held the frames it passed through, and so the
    # arrays of the call that planned the dBN stage first (the forward's saved results): a CUDA graph
    # of the forward, captured before, then saw them held and never handed its results out again.
    import gc
    import weakref
    from lazytensor.cbr.cudnn_cache import ConvGraphCache
    from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
    from lazytensor.cbr.cudnn_dbn import dbn_key
    from lazytensor.cbr.cudnn_graphs import GraphKind
    cache = ConvGraphCache(table=None)
    key = dbn_key((2, 4, 4, 8))

    def reject(kind, key, device_id, pointers):
        raise CudnnGraphRejected(kind.value, key, "no engine")
    monkeypatch.setattr(cache, "_build", reject)

    def caller(saved):                  # a frame holding an array, as cudnn_dbn.dbn_relu's does
        cache.get(GraphKind.DBN_RELU, key, 0, {})

    for _ in range(2):                  # built and rejected, then rejected from the cache
        saved = np.ones(4)
        alive = weakref.ref(saved)
        try:
            caller(saved)
        except CudnnGraphRejected as e:
            assert "no engine" in e.reason and e.key == key
        del saved
        gc.collect()
        assert alive() is None
