"""The CPU convolutions leave out window taps that read only padding: which taps those are (against a
brute-force scan of every output), and that the three convolutions over maps where most taps read
padding (a 3x3 conv over 1x1 and 2x2 maps, ResNet's last stages) still equal the float64 definition."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazytensor.cbr.conv_cpu import (conv2d_backward_data_nhwc, conv2d_backward_filter_nhwc, conv2d_nhwc,
                                     tap_range, useful_taps)
from lazytensor.cbr.conv_reference import conv2d_nhwc_reference
from tests.support.conv_grad_reference import dgrad_reference, wgrad_reference


@settings(max_examples=300, deadline=None)
@given(taps=st.integers(1, 7), size=st.integers(1, 9), out=st.integers(1, 9), stride=st.integers(1, 4),
       pad=st.integers(0, 4), dilation=st.integers(1, 3))
def test_useful_taps_are_those_some_output_reads_x_with(taps, size, out, stride, pad, dilation):
    reads_x = [any(0 <= o * stride + t * dilation - pad < size for o in range(out)) for t in range(taps)]
    assert list(useful_taps(taps, size, out, stride, pad, dilation)) == reads_x
    first, last = tap_range(taps, size, out, stride, pad, dilation)
    if any(reads_x):
        assert reads_x[first] and reads_x[last - 1] and not any(reads_x[:first]) and not any(reads_x[last:])
    else:
        assert (first, last) == (0, 0)


CROPPED = [  # (x shape, w shape, stride, padding, dilation): most taps read padding only
    ((3, 1, 1, 5), (4, 3, 3, 5), 1, 1, 1),
    ((2, 2, 2, 3), (4, 3, 3, 3), 2, 1, 1),
    ((2, 2, 3, 3), (2, 3, 3, 3), (2, 1), 1, 1),
    ((2, 1, 4, 2), (3, 5, 3, 2), 1, (2, 1), 1),
    ((2, 3, 3, 2), (3, 3, 3, 2), 1, 2, 2),
    ((1, 4, 4, 2), (2, 7, 7, 2), 2, 3, 1),
    ((2, 1, 1, 4), (3, 1, 1, 4), 1, 0, 1),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation", CROPPED)
def test_convolutions_over_maps_mostly_padding_match_the_definition(x_shape, w_shape, stride, padding, dilation,
                                                                     dtype):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    ref = conv2d_nhwc_reference(x, w, stride, padding, dilation)
    dy = rng.standard_normal(ref.shape).astype(dtype)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(conv2d_nhwc(x, w, stride, padding, dilation), ref, **tol)
    np.testing.assert_allclose(conv2d_backward_data_nhwc(dy, w, x.shape, stride, padding, dilation),
                               dgrad_reference(dy, w, x.shape, stride, padding, dilation), **tol)
    dw = np.full(w_shape, np.nan, dtype)        # every element written, the skipped taps' zeros too
    conv2d_backward_filter_nhwc(x, dy, w_shape, stride, padding, dilation, out=dw)
    np.testing.assert_allclose(dw, wgrad_reference(x, dy, w_shape, stride, padding, dilation), **tol)
