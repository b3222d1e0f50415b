"""conv2d_nhwc (im2col + BLAS) against the float64 tap-by-tap definition, and its argument errors."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lazytensor.cbr.conv_cpu import conv2d_nhwc, conv_output_shape, validate_conv_args
from lazytensor.cbr.conv_reference import conv2d_nhwc_reference

pairs = st.tuples


@st.composite
def conv_cases(draw, max_hw=10):
    n = draw(st.integers(1, 3))
    h = draw(st.integers(1, max_hw))
    w = draw(st.integers(1, max_hw))
    c = draw(st.integers(1, 6))
    k = draw(st.integers(1, 6))
    r = draw(st.integers(1, 4))
    s = draw(st.integers(1, 4))
    stride = draw(st.one_of(st.integers(1, 3), pairs(st.integers(1, 3), st.integers(1, 3))))
    padding = draw(st.one_of(st.integers(0, 2), pairs(st.integers(0, 2), st.integers(0, 2))))
    dilation = draw(st.one_of(st.integers(1, 3), pairs(st.integers(1, 3), st.integers(1, 3))))
    _, p, q, _ = conv_output_shape((n, h, w, c), (k, r, s, c), stride, padding, dilation)
    assume(p > 0 and q > 0)
    seed = draw(st.integers(0, 2**32 - 1))
    return (n, h, w, c), (k, r, s, c), stride, padding, dilation, seed


def random_operands(x_shape, w_shape, seed, dtype):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    return x, w


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(conv_cases())
def test_float32_matches_float64_definition(case):
    x_shape, w_shape, stride, padding, dilation, seed = case
    x, w = random_operands(x_shape, w_shape, seed, np.float32)
    y = conv2d_nhwc(x, w, stride, padding, dilation)
    ref = conv2d_nhwc_reference(x, w, stride, padding, dilation)
    assert y.dtype == np.float32
    assert y.shape == ref.shape == conv_output_shape(x_shape, w_shape, stride, padding, dilation)
    terms = w_shape[1] * w_shape[2] * w_shape[3]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6 * terms)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(conv_cases())
def test_float16_computes_in_float32_and_rounds_once(case):
    x_shape, w_shape, stride, padding, dilation, seed = case
    x, w = random_operands(x_shape, w_shape, seed, np.float16)
    y = conv2d_nhwc(x, w, stride, padding, dilation)
    assert y.dtype == np.float16
    # The float64 result of the same float16 operands, rounded once to float16.
    ref = conv2d_nhwc_reference(x, w, stride, padding, dilation)
    np.testing.assert_allclose(y.astype(np.float64), ref.astype(np.float16).astype(np.float64), rtol=2e-3, atol=2e-3)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(conv_cases())
def test_float64_stays_float64(case):
    x_shape, w_shape, stride, padding, dilation, seed = case
    x, w = random_operands(x_shape, w_shape, seed, np.float64)
    y = conv2d_nhwc(x, w, stride, padding, dilation)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, conv2d_nhwc_reference(x, w, stride, padding, dilation), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("block_bytes", [1, 20_000, 200_000, 8 << 20])
def test_column_blocks_cover_the_output(monkeypatch, block_bytes):
    # From one output row per block (runs within an image) to several whole images per block.
    from lazytensor.cbr import conv_cpu

    monkeypatch.setattr(conv_cpu, "COLUMN_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 13, 11, 6)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 6)).astype(np.float32)
    y = conv2d_nhwc(x, w, stride=(2, 1), padding=1)
    np.testing.assert_allclose(y, conv2d_nhwc_reference(x, w, (2, 1), 1), rtol=1e-5, atol=1e-4)


def test_many_small_images_in_one_block():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((64, 5, 6, 8)).astype(np.float32)
    w = rng.standard_normal((8, 2, 3, 8)).astype(np.float32)
    y = conv2d_nhwc(x, w, stride=(2, 1), padding=(1, 0), dilation=(1, 2))
    np.testing.assert_allclose(y, conv2d_nhwc_reference(x, w, (2, 1), (1, 0), (1, 2)), rtol=1e-5, atol=1e-5)


def test_writes_into_out_and_returns_it():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 5, 3)).astype(np.float16)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float16)
    out = np.full((2, 6, 5, 4), np.nan, dtype=np.float16)
    y = conv2d_nhwc(x, w, 1, 1, out=out)
    assert y is out
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out, conv2d_nhwc(x, w, 1, 1))


def test_non_contiguous_inputs():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 7, 9, 8)).astype(np.float32)[:, ::2, ::-1, 1:6]
    w = rng.standard_normal((3, 2, 2, 10)).astype(np.float32)[:, :, :, ::2]
    np.testing.assert_allclose(conv2d_nhwc(x, w, 1, 1), conv2d_nhwc_reference(x, w, 1, 1), rtol=1e-5, atol=1e-5)


# ---- errors -----------------------------------------------------------------------------------

F32 = np.float32


@pytest.mark.parametrize(
    "x_shape, w_shape, kwargs, match",
    [
        ((2, 5, 5), (4, 3, 3, 3), {}, r"x of rank 4.*got rank 3 with shape \(2, 5, 5\)"),
        ((2, 5, 5, 3), (4, 3, 3), {}, r"w of rank 4.*got rank 3"),
        ((2, 5, 5, 3), (4, 3, 3, 4), {}, r"x has 3 channels but w expects 4"),
        ((2, 5, 5, 3), (4, 3, 3, 3), {"stride": 0}, r"stride must be positive; got \(0, 0\)"),
        ((2, 5, 5, 3), (4, 3, 3, 3), {"stride": (1, -2)}, r"stride must be positive"),
        ((2, 5, 5, 3), (4, 3, 3, 3), {"dilation": (0, 1)}, r"dilation must be positive"),
        ((2, 5, 5, 3), (4, 3, 3, 3), {"padding": -1}, r"padding must be >= 0"),
        ((2, 5, 5, 3), (4, 7, 3, 3), {}, r"output would be empty .* smaller than the dilated window 7x3"),
        ((2, 5, 5, 3), (4, 3, 3, 3), {"dilation": 3}, r"output would be empty"),
        ((0, 5, 5, 3), (4, 3, 3, 3), {}, r"empty x"),
    ],
)
def test_shape_errors_name_the_problem(x_shape, w_shape, kwargs, match):
    with pytest.raises(ValueError, match=match):
        validate_conv_args(x_shape, w_shape, F32, F32, **{"stride": 1, "padding": 0, "dilation": 1, **kwargs})
    if len(x_shape) == 4 and len(w_shape) == 4 and min(x_shape) > 0:
        with pytest.raises(ValueError, match=match):
            conv2d_nhwc(np.ones(x_shape, F32), np.ones(w_shape, F32), **kwargs)


def test_dtype_errors():
    with pytest.raises(TypeError, match=r"x is float16 but w is float32"):
        validate_conv_args((1, 3, 3, 2), (1, 1, 1, 2), np.float16, np.float32)
    with pytest.raises(TypeError, match=r"floating-point .* x is int32"):
        conv2d_nhwc(np.ones((1, 3, 3, 2), np.int32), np.ones((1, 1, 1, 2), np.int32))


@pytest.mark.parametrize("bad", [1.5, (1, 2, 3), "2", True, (1, None)])
def test_argument_kind_errors(bad):
    with pytest.raises(TypeError, match=r"stride must be an int or a pair of ints"):
        validate_conv_args((1, 5, 5, 2), (1, 1, 1, 2), F32, F32, stride=bad)


def test_out_must_match():
    x, w = np.ones((1, 4, 4, 2), F32), np.ones((3, 3, 3, 2), F32)
    with pytest.raises(ValueError, match=r"out must be a C-contiguous float32 array of shape \(1, 2, 2, 3\)"):
        conv2d_nhwc(x, w, out=np.empty((1, 2, 2, 4), F32))
    with pytest.raises(ValueError, match=r"out must be"):
        conv2d_nhwc(x, w, out=np.empty((1, 2, 2, 3), np.float64))
