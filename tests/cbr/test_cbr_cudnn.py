"""The cuDNN CBR graphs against NumPy references (GPU only; skipped without CuPy, cuDNN frontend or a device)."""

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")
pytest.importorskip("cudnn")
try:
    _devices = cupy.cuda.runtime.getDeviceCount()
except Exception:  # noqa: BLE001 - a driver without a device raises here
    _devices = 0
if _devices == 0:
    pytest.skip("no CUDA device", allow_module_level=True)

from lazytensor.cbr.conv_cpu import conv2d_nhwc  # noqa: E402
from lazytensor.cbr.conv_key import ConvKey  # noqa: E402
from lazytensor.cbr.cudnn_cache import ConvGraphCache  # noqa: E402
from lazytensor.cbr.cudnn_conv import conv2d, conv2d_genstats, conv2d_scale_bias_relu  # noqa: E402
from lazytensor.cbr.cudnn_errors import CudnnGraphRejected  # noqa: E402
from lazytensor.cbr.cudnn_graphs import GraphKind, build_conv_graph  # noqa: E402
from lazytensor.cbr.cudnn_handle import bind_current_stream, handle_for_device  # noqa: E402
from lazytensor.cbr.experience_table import ExperienceTable, make_entry  # noqa: E402

# (x shape NHWC, w shape KRSC, stride, padding, dilation): 3x3, strided, dilated, 1x1 downsample, uneven
CASES = [
    ((2, 8, 8, 16), (32, 3, 3, 16), 1, 1, 1),
    ((3, 9, 11, 8), (16, 3, 3, 8), 2, 1, 1),
    ((2, 12, 10, 24), (8, 3, 3, 24), 1, 2, 2),
    ((4, 14, 14, 32), (64, 1, 1, 32), 2, 0, 1),
    ((1, 10, 7, 16), (16, 3, 1, 16), (1, 2), (1, 0), 1),
]
IDS = ["3x3", "3x3-stride2", "3x3-dilation2", "1x1-stride2", "3x1-uneven"]


def operands(x_shape, w_shape, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float16)
    fan_in = w_shape[1] * w_shape[2] * w_shape[3]
    w = (rng.standard_normal(w_shape) / np.sqrt(fan_in)).astype(np.float16)
    return x, w


def assert_close_to_float32(got_fp16, ref32, what):
    got = got_fp16.astype(np.float32)
    scale = float(np.abs(ref32).max()) or 1.0
    err = float(np.abs(got - ref32).max())
    # One float16 rounding of the result (2^-11 relative) plus float32 accumulation-order noise.
    assert err <= 2e-3 * scale + 1e-3, f"{what}: max |error| {err:.3g} against max |ref| {scale:.3g}"


@pytest.fixture
def cache():
    # No experience table and no timing: cuDNN's first plan, so each test builds exactly what it names.
    return ConvGraphCache(tune=False, table=None)


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation", CASES, ids=IDS)
def test_conv_matches_float32_reference(cache, x_shape, w_shape, stride, padding, dilation):
    x, w = operands(x_shape, w_shape)
    y = conv2d(cupy.asarray(x), cupy.asarray(w), stride, padding, dilation, cache=cache)
    ref = conv2d_nhwc(x.astype(np.float32), w.astype(np.float32), stride, padding, dilation)
    assert y.dtype == cupy.float16 and y.shape == ref.shape
    assert_close_to_float32(cupy.asnumpy(y), ref, "conv")


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation", CASES, ids=IDS)
def test_genstats_sums_are_sums_of_the_output(cache, x_shape, w_shape, stride, padding, dilation):
    x, w = operands(x_shape, w_shape, seed=1)
    # Garbage in the sum buffers: the result must not depend on what was there.
    k = w_shape[0]
    sum_out = cupy.full(k, 1e6, dtype=cupy.float32)
    sum_sq_out = cupy.full(k, -3.0, dtype=cupy.float32)
    y, total, total_sq = conv2d_genstats(
        cupy.asarray(x), cupy.asarray(w), stride, padding, dilation, sum_out=sum_out, sum_sq_out=sum_sq_out, cache=cache
    )
    assert total is sum_out and total_sq is sum_sq_out
    ref = conv2d_nhwc(x.astype(np.float32), w.astype(np.float32), stride, padding, dilation)
    y_host = cupy.asnumpy(y)
    assert_close_to_float32(y_host, ref, "conv+genstats output")
    flat = y_host.astype(np.float64).reshape(-1, k)
    exact = ref.astype(np.float64).reshape(-1, k)
    # The sums may come from the float32 accumulator (before y is rounded) or from y itself: allow both.
    tol_sum = 2e-3 * np.abs(exact).sum(0) + 1e-3
    tol_sq = 3e-3 * (exact * exact).sum(0) + 1e-3
    np.testing.assert_array_less(np.abs(cupy.asnumpy(total) - flat.sum(0)), tol_sum)
    np.testing.assert_array_less(np.abs(cupy.asnumpy(total_sq) - (flat * flat).sum(0)), tol_sq)


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation", CASES[:2] + CASES[3:4], ids=IDS[:2] + IDS[3:4])
def test_inference_graph_is_conv_then_scale_bias_relu(cache, x_shape, w_shape, stride, padding, dilation):
    x, w = operands(x_shape, w_shape, seed=2)
    k = w_shape[0]
    rng = np.random.default_rng(3)
    eq_scale = rng.uniform(0.5, 2.0, k).astype(np.float32)
    eq_bias = rng.standard_normal(k).astype(np.float32)
    try:
        y = conv2d_scale_bias_relu(
            cupy.asarray(x), cupy.asarray(w), cupy.asarray(eq_scale), cupy.asarray(eq_bias), stride, padding, dilation, cache=cache
        )
    except CudnnGraphRejected as e:
        assert e.kind == "conv_scale_bias_relu" and e.reason
        pytest.xfail(f"cuDNN rejected the inference graph (the caller falls back to conv + epilogue): {e}")
    conv = conv2d_nhwc(x.astype(np.float32), w.astype(np.float32), stride, padding, dilation)
    ref = np.maximum(conv * eq_scale + eq_bias, 0.0)
    assert_close_to_float32(cupy.asnumpy(y), ref, "conv+scale+bias+relu")
    assert (cupy.asnumpy(y) >= 0).all()


def test_second_call_reuses_the_built_graph(cache):
    x, w = operands((2, 8, 8, 16), (16, 3, 3, 16), seed=4)
    xd, wd = cupy.asarray(x), cupy.asarray(w)
    y1, s1, q1 = conv2d_genstats(xd, wd, 1, 1, cache=cache)
    key = ConvKey.of(x.shape, w.shape, "float16", 1, 1, 1)
    first = cache.entry(GraphKind.CONV_GENSTATS, key, xd.device.id)
    assert cache.builds == 1 and cache.hits == 0 and first.launches == 1
    y2, s2, q2 = conv2d_genstats(xd, wd, 1, 1, cache=cache)
    assert cache.builds == 1 and cache.hits == 1
    assert cache.entry(GraphKind.CONV_GENSTATS, key, xd.device.id) is first and first.launches == 2
    cupy.testing.assert_array_equal(y1, y2)
    cupy.testing.assert_array_equal(s1, s2)  # written afresh by each run, not accumulated across calls
    cupy.testing.assert_array_equal(q1, q2)
    # Another graph kind of the same shape is its own entry.
    conv2d(xd, wd, 1, 1, cache=cache)
    assert cache.builds == 2 and len(cache) == 2


def test_every_genstats_plan_writes_rather_than_adds():
    # conv2d_genstats hands cuDNN uninitialised sum buffers: that is only right if no plan accumulates.
    x, w = operands((2, 8, 8, 16), (16, 3, 3, 16), seed=9)
    key = ConvKey.of(x.shape, w.shape, "float16", 1, 1, 1)
    device_id = cupy.cuda.Device().id
    handle = handle_for_device(device_id)
    bind_current_stream(handle)
    cg = build_conv_graph(GraphKind.CONV_GENSTATS, key, handle)
    xd, wd = cupy.asarray(x), cupy.asarray(w)
    y = cupy.empty(key.out_shape, dtype=cupy.float16)
    total, total_sq = cupy.empty(16, cupy.float32), cupy.empty(16, cupy.float32)
    operands_ = cg.operand_pointers({"x": xd.data.ptr, "w": wd.data.ptr, "y": y.data.ptr, "sum": total.data.ptr, "sum_sq": total_sq.data.ptr})
    ran = 0
    for index in range(cg.plan_count):
        try:
            ws = cg.build_plan(index)
        except Exception:  # noqa: BLE001 - a plan that does not build is not run either
            continue
        workspace = cupy.empty(max(ws, 1), dtype=cupy.uint8)
        total.fill(1e6)
        total_sq.fill(1e6)
        cg.launch(index, operands_, workspace.data.ptr if ws else 0)
        flat = cupy.asnumpy(y).astype(np.float64).reshape(-1, 16)
        np.testing.assert_allclose(cupy.asnumpy(total), flat.sum(0), rtol=1e-2, atol=0.5, err_msg=f"plan {cg.plan_name(index)}")
        np.testing.assert_allclose(cupy.asnumpy(total_sq), (flat * flat).sum(0), rtol=1e-2, err_msg=f"plan {cg.plan_name(index)}")
        ran += 1
    assert ran >= 1


def test_native_ordered_and_mapping_launches_agree(cache):
    x, w = operands((2, 8, 8, 16), (16, 3, 3, 16), seed=10)
    xd, wd = cupy.asarray(x), cupy.asarray(w)
    y1 = conv2d(xd, wd, 1, 1, cache=cache)
    entry = cache.entry(GraphKind.CONV, ConvKey.of(x.shape, w.shape, "float16", 1, 1, 1), xd.device.id)
    graph = entry.graph
    assert graph.launch_form(entry.plan.index).startswith("native"), graph.native_refusal
    ref = conv2d_nhwc(x.astype(np.float32), w.astype(np.float32), 1, 1)
    assert_close_to_float32(cupy.asnumpy(y1), ref, "native launch")
    graph._native[entry.plan.index] = None              # the public forms from here on
    y2 = conv2d(xd, wd, 1, 1, cache=cache)
    cupy.testing.assert_array_equal(y1, y2)
    if not graph.ordered_launch:
        pytest.skip(f"this cuDNN frontend refused the ordered variant pack: {graph.ordered_launch_refusal}")
    graph.ordered_launch = False
    y3 = conv2d(xd, wd, 1, 1, cache=cache)
    cupy.testing.assert_array_equal(y1, y3)


def test_runs_on_a_non_default_stream(cache):
    x, w = operands((2, 8, 8, 16), (16, 3, 3, 16), seed=5)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        y = conv2d(cupy.asarray(x), cupy.asarray(w), 1, 1, cache=cache)
    stream.synchronize()
    ref = conv2d_nhwc(x.astype(np.float32), w.astype(np.float32), 1, 1)
    assert_close_to_float32(cupy.asnumpy(y), ref, "conv on a side stream")


def test_timing_keeps_the_fastest_candidate():
    cache = ConvGraphCache(tune=True, candidates=3, runs=2, table=None)
    x, w = operands((4, 16, 16, 32), (32, 3, 3, 32), seed=6)
    xd, wd = cupy.asarray(x), cupy.asarray(w)
    y = conv2d(xd, wd, 1, 1, cache=cache)
    entry = cache.entry(GraphKind.CONV, ConvKey.of(x.shape, w.shape, "float16", 1, 1, 1), xd.device.id)
    plan = entry.plan
    assert plan.source == "timed"
    assert 1 <= len(plan.timings) <= 3
    assert plan.name in plan.times_ms and plan.times_ms[plan.name] == min(plan.times_ms.values())
    assert plan.index == plan.timings[0].index
    assert "timed" in entry.describe()
    ref = conv2d_nhwc(x.astype(np.float32), w.astype(np.float32), 1, 1)
    assert_close_to_float32(cupy.asnumpy(y), ref, "conv with the timed plan")


def test_table_hit_builds_the_recorded_plan_without_timing(monkeypatch):
    x, w = operands((2, 8, 8, 16), (16, 3, 3, 16), seed=7)
    xd, wd = cupy.asarray(x), cupy.asarray(w)
    key = ConvKey.of(x.shape, w.shape, "float16", 1, 1, 1)
    # Learn the names cuDNN gives this graph's plans, then record the second one as the winner.
    probe = ConvGraphCache(tune=True, candidates=2, runs=1, table=None)
    conv2d(xd, wd, 1, 1, cache=probe)
    timings = probe.entry(GraphKind.CONV, key, xd.device.id).plan.timings
    chosen = max(timings, key=lambda t: t.index)  # not cuDNN's first choice when two plans ran
    table = ExperienceTable("test gpu", 1)
    table.record(GraphKind.CONV, key, make_entry(10, [chosen], {}))
    cache = ConvGraphCache(tune=True, table=table)
    monkeypatch.setattr("lazytensor.cbr.cudnn_plans.time_launches", fail_if_called)
    y = conv2d(xd, wd, 1, 1, cache=cache)
    plan = cache.entry(GraphKind.CONV, key, xd.device.id).plan
    assert plan.source == "table" and plan.name == chosen.name and plan.index == chosen.index
    ref = conv2d_nhwc(x.astype(np.float32), w.astype(np.float32), 1, 1)
    assert_close_to_float32(cupy.asnumpy(y), ref, "conv with the table's plan")


def test_table_names_missing_from_cuda_fall_back_to_heuristics(monkeypatch):
    x, w = operands((2, 8, 8, 16), (16, 3, 3, 16), seed=8)
    key = ConvKey.of(x.shape, w.shape, "float16", 1, 1, 1)
    table = ExperienceTable("test gpu", 1)
    table.shapes[key.table_key()] = {"conv": {"winner": {"name": "no such plan", "index": 0}}}
    monkeypatch.setenv("LAZYTENSOR_CBR_TUNE", "0")
    cache = ConvGraphCache(table=table)
    conv2d(cupy.asarray(x), cupy.asarray(w), 1, 1, cache=cache)
    plan = cache.entry(GraphKind.CONV, key, cupy.cuda.Device().id).plan
    assert plan.source == "heuristic"
    assert "no such plan" in plan.failures


def test_bad_operands_raise_before_any_graph(cache):
    x = cupy.zeros((2, 8, 8, 16), dtype=cupy.float32)
    w = cupy.zeros((16, 3, 3, 16), dtype=cupy.float32)
    with pytest.raises(TypeError, match="x and w of one dtype among bfloat16, float16, float32, float64; "
                                        "got x float32, w float16"):
        conv2d(x, w.astype(cupy.float16), 1, 1, cache=cache)       # float32 alone is taken: not with float16
    with pytest.raises(ValueError, match="x has 16 channels but w expects 8"):
        conv2d(x.astype(cupy.float16), cupy.zeros((16, 3, 3, 8), cupy.float16), cache=cache)
    with pytest.raises(TypeError, match="CuPy array"):
        conv2d(np.zeros((2, 8, 8, 16), np.float16), w.astype(cupy.float16), cache=cache)
    with pytest.raises(TypeError, match=r"eq_scale must be a float32 CuPy vector of shape \(16,\)"):
        conv2d_scale_bias_relu(
            x.astype(cupy.float16), w.astype(cupy.float16), cupy.ones(8, cupy.float32), cupy.ones(16, cupy.float32), cache=cache
        )
    assert cache.builds == 0


def fail_if_called(*args, **kwargs):
    raise AssertionError("a plan was timed although the experience table named one")
