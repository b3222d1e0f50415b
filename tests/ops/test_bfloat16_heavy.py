"""bfloat16 beyond elementwise ops, on the CPU: reductions (accumulating in float32, against float64
sums of the same values rounded once), matmul, conv2d, batch_norm and pooling (computed in float32,
rounded to bfloat16), and gradients of bfloat16 graphs against float64 finite differences of the
same function on the float32 upcast of the inputs."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt
from tests.ops.test_bfloat16 import interpreter_only  # noqa: F401 (a fixture)

BF = np.dtype(ml_dtypes.bfloat16)
EPS = 2.0 ** -8          # bfloat16's unit roundoff: a result rounded once is within EPS * |value|
PROFILE = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _f64(a):
    return np.asarray(a).astype(np.float64)


def assert_rounded_once(got, want, scale=None, err_msg=""):
    """got (bfloat16) is float64 `want` rounded to bfloat16, up to float32 accumulation: within
    EPS * |want| + 1e-6 * scale."""
    got = np.asarray(got)
    assert got.dtype == BF, (err_msg, got.dtype)
    scale = np.abs(want) if scale is None else scale
    bound = EPS * np.abs(want) + 1e-6 * scale + 1e-30
    same = (np.abs(_f64(got) - want) <= bound) | (np.isnan(_f64(got)) & np.isnan(want)) | (_f64(got) == want)
    assert same.all(), f"{err_msg}: {got[~same][:5]} vs {want[~same][:5]}"


@PROFILE
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=9),
                  elements=st.floats(-100, 100, width=32)).map(lambda a: a.astype(BF)),
       st.sampled_from([None, 0, -1]))
def test_reductions_accumulate_in_float32(a, axis):
    x = lt.asarray(a)
    f = _f64(a)
    magnitude = np.sum(np.abs(f), axis=axis)
    for kind in ("sum", "mean"):
        got = getattr(lt, kind)(x, axis=axis)
        want = getattr(np, kind)(f, axis=axis)
        assert got.dtype == BF
        assert_rounded_once(np.asarray(got), want, magnitude, kind)
    for kind in ("max", "min"):      # exact
        got = np.asarray(getattr(lt, kind)(x, axis=axis))
        np.testing.assert_array_equal(_f64(got), getattr(np, kind)(f, axis=axis))
    np.testing.assert_array_equal(np.asarray(lt.argmax(x, axis=axis if axis is None else 0)),
                                  np.argmax(f, axis=axis if axis is None else 0))
    var = np.asarray(lt.var(x, axis=axis))
    assert_rounded_once(var, np.var(f, axis=axis), np.mean(f * f, axis=axis) * f.size, "var")
    assert lt.sum(x, axis=axis, dtype=lt.float32).dtype == np.float32


def test_reductions_in_the_interpreter_tier(interpreter_only):  # noqa: F811
    a = np.linspace(-3, 5, 37 * 11, dtype=np.float32).reshape(37, 11).astype(BF)
    f = _f64(a)
    for axis in (None, 0, 1):
        for kind in ("sum", "mean"):
            assert_rounded_once(np.asarray(getattr(lt, kind)(lt.asarray(a), axis=axis)), getattr(np, kind)(f, axis=axis),
                                np.sum(np.abs(f), axis=axis), kind)
        np.testing.assert_array_equal(_f64(np.asarray(lt.max(lt.asarray(a), axis=axis))), np.max(f, axis=axis))
    assert float(lt.asarray(np.ones(1000, BF)).sum()) == 1000.0


def test_a_long_sum_is_not_added_in_bfloat16():
    """NumPy's ml_dtypes loop adds in bfloat16 (1000 ones sum to 256); lazytensor in float32."""
    ones = np.ones(1000, BF)
    assert float(lt.asarray(ones).sum()) == 1000.0
    assert float(lt.asarray(ones).mean()) == 1.0


def test_reductions_with_nan_and_inf():
    a = np.array([[1.0, np.nan, 3.0], [np.inf, -1.0, 2.0]], np.float32).astype(BF)
    x = lt.asarray(a)
    np.testing.assert_array_equal(_f64(np.asarray(lt.max(x, axis=1))), np.max(_f64(a), axis=1))
    np.testing.assert_array_equal(_f64(np.asarray(lt.sum(x, axis=0))), np.sum(_f64(a), axis=0))


@pytest.mark.parametrize("shapes", [((5, 7), (7, 3)), ((7,), (7, 4)), ((2, 3, 8), (8, 2)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_rounds_the_float32_product_once(shapes):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(BF) for s in shapes)
    got = lt.asarray(a) @ lt.asarray(b)
    assert got.dtype == BF                     # as np.dot and JAX (np.matmul with ml_dtypes: float32)
    want = np.matmul(_f64(a), _f64(b))
    assert_rounded_once(np.asarray(got), want, np.matmul(np.abs(_f64(a)), np.abs(_f64(b))), "matmul")


def test_conv_batch_norm_pooling_compute_in_float32():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 7, 6, 3)).astype(BF)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(BF)
    y = lt.conv2d(lt.asarray(x), lt.asarray(w), stride=(2, 1), padding=1)
    want = lt.conv2d(lt.asarray(_f64(x)), lt.asarray(_f64(w)), stride=(2, 1), padding=1).numpy()
    scale = lt.conv2d(lt.asarray(np.abs(_f64(x))), lt.asarray(np.abs(_f64(w))), stride=(2, 1), padding=1).numpy()
    assert y.dtype == BF
    assert_rounded_once(np.asarray(y), want, scale, "conv2d")

    yb = np.asarray(y)
    gamma, beta = lt.asarray(np.full(4, 1.5, np.float32)), lt.asarray(np.full(4, 0.25, np.float32))
    rm, rv = lt.zeros(4, dtype=lt.float32), lt.ones(4, dtype=lt.float32)
    z = np.asarray(lt.relu(lt.batch_norm(lt.asarray(yb), gamma, beta, rm, rv, training=True)))
    f = _f64(yb)
    mean, var = f.mean(axis=(0, 1, 2)), f.var(axis=(0, 1, 2))
    want = np.maximum(1.5 * (f - mean) / np.sqrt(var + 1e-5) + 0.25, 0)
    assert_rounded_once(z, want, np.full_like(want, 1e2), "batch_norm")
    np.testing.assert_allclose(rm.numpy(), 0.1 * mean, rtol=1e-5, atol=1e-6)

    p = np.asarray(lt.max_pool2d(lt.asarray(z), 2))
    np.testing.assert_array_equal(_f64(p), _f64(z)[:, :4, :6].reshape(2, 2, 2, 3, 2, 4).max(axis=(2, 4)))
    q = np.asarray(lt.avg_pool2d(lt.asarray(z), 2))
    assert_rounded_once(q, _f64(z)[:, :4, :6].reshape(2, 2, 2, 3, 2, 4).mean(axis=(2, 4)), err_msg="avg_pool2d")


def _finite_differences(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("case", ["elementwise", "matmul", "reduction"])
def test_gradients_of_bfloat16_graphs(case):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4)).astype(BF)
    b = rng.standard_normal((4, 2)).astype(BF)
    fns = {
        "elementwise": (lambda m, x, y: (m.tanh(x) * x + x * x / 3).sum(), a),
        "matmul": (lambda m, x, y: m.tanh(x @ y).sum(), a),
        "reduction": (lambda m, x, y: (m.exp(x - m.max(x, axis=1, keepdims=True)).sum(axis=1) ** 2).sum(), a),
    }
    fn, x0 = fns[case]
    x, y = lt.asarray(x0), lt.asarray(b)
    (gx,) = lt.grad(fn(lt, x, y), [x])
    assert gx.dtype == BF
    want = _finite_differences(lambda v: fn(np, v, _f64(b)), _f64(x0))
    got = _f64(np.asarray(gx))
    # bfloat16 forward and backward values: a few roundings of 2^-8 each, relative to the gradient's scale
    np.testing.assert_allclose(got, want, rtol=3e-2, atol=3e-2 * np.max(np.abs(want)))
