"""The backward convolutions (dgrad, wgrad) on the CPU: the BLAS functions and the lazy nodes, against
float64 references from the definition, and the adjoint identity with the forward conv's reference."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import lazytensor as lt
from lazytensor.cbr.conv_cpu import conv2d_backward_data_nhwc, conv2d_backward_filter_nhwc
from lazytensor.cbr.conv_reference import conv2d_nhwc_reference
from tests.support.conv_grad_reference import conv_cases, dgrad_reference, wgrad_reference

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])


def operands(case, dtype):
    x_shape, w_shape, stride, padding, dilation, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    y_shape = lt.conv2d(lt.asarray(x), lt.asarray(w), stride=stride, padding=padding, dilation=dilation).shape
    dy = rng.standard_normal(y_shape).astype(dtype)
    return x, w, dy


def tolerance(dtype, terms):
    # float64: summation order; float32: one float32 accumulation; float16: rounding of the result
    return {np.float64: (1e-12, 1e-12 * terms), np.float32: (1e-5, 2e-6 * terms),
            np.float16: (2e-3, 2e-3 * np.sqrt(terms))}[dtype]


@SETTINGS
@given(conv_cases())
def test_dgrad_and_wgrad_match_the_definition(case):
    _, w_shape, stride, padding, dilation, _ = case
    for dtype in (np.float64, np.float32, np.float16):
        x, w, dy = operands(case, dtype)
        dx = conv2d_backward_data_nhwc(dy, w, x.shape, stride, padding, dilation)
        dw = conv2d_backward_filter_nhwc(x, dy, w.shape, stride, padding, dilation)
        assert dx.dtype == dtype and dw.dtype == dtype and dx.shape == x.shape and dw.shape == w.shape
        rtol, atol = tolerance(dtype, w_shape[0] * w_shape[1] * w_shape[2])
        np.testing.assert_allclose(dx, dgrad_reference(dy, w, x.shape, stride, padding, dilation), rtol, atol)
        rtol, atol = tolerance(dtype, dy.shape[0] * dy.shape[1] * dy.shape[2])
        np.testing.assert_allclose(dw, wgrad_reference(x, dy, w.shape, stride, padding, dilation), rtol, atol)


@SETTINGS
@given(conv_cases())
def test_adjoint_identity_with_the_forward_reference(case):
    # <conv(x, w), dy> = <x, dgrad(dy, w)> = <w, wgrad(x, dy)>: the forward conv's own oracle decides
    _, _, stride, padding, dilation, _ = case
    x, w, dy = operands(case, np.float64)
    forward = float((conv2d_nhwc_reference(x, w, stride, padding, dilation) * dy).sum())
    dx = conv2d_backward_data_nhwc(dy, w, x.shape, stride, padding, dilation)
    dw = conv2d_backward_filter_nhwc(x, dy, w.shape, stride, padding, dilation)
    scale = np.abs(x).sum() * np.abs(w).sum() * np.abs(dy).max()
    assert abs(float((x * dx).sum()) - forward) <= 1e-12 * scale
    assert abs(float((w * dw).sum()) - forward) <= 1e-12 * scale


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(conv_cases())
def test_nodes_evaluate_to_the_definition(case):
    _, w_shape, stride, padding, dilation, _ = case
    x, w, dy = operands(case, np.float32)
    kw = dict(stride=stride, padding=padding, dilation=dilation)
    X, W, DY = lt.asarray(x), lt.asarray(w), lt.asarray(dy)
    dx = lt.evaluate(lt.conv2d_backward_data(DY * 2.0, W, x.shape, **kw)).numpy()   # an expression as dy
    dw = lt.evaluate(lt.conv2d_backward_filter(X, DY, w.shape, **kw)).numpy()
    rtol, atol = tolerance(np.float32, 2 * w_shape[0] * w_shape[1] * w_shape[2])
    np.testing.assert_allclose(dx, dgrad_reference(2.0 * dy, w, x.shape, stride, padding, dilation), rtol, atol)
    rtol, atol = tolerance(np.float32, dy.shape[0] * dy.shape[1] * dy.shape[2])
    np.testing.assert_allclose(dw, wgrad_reference(x, dy, w.shape, stride, padding, dilation), rtol, atol)


def test_strided_operands_and_destination_and_fusion_above():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    dy = rng.standard_normal((2, 4, 3, 4)).astype(np.float32)
    kw = dict(stride=2, padding=1, dilation=1)
    # x read through a transposed view (not contiguous): the plan copies it first
    xt = lt.asarray(np.ascontiguousarray(x.transpose(0, 2, 1, 3))).transpose(0, 2, 1, 3)
    node = lt.conv2d_backward_filter(xt, lt.asarray(dy), w.shape, **kw)
    big = lt.zeros((8, 3, 3, 3), dtype=np.float32)
    big[::2] = node * 3.0 + 1.0          # elementwise work above the step, into a strided destination
    ref = wgrad_reference(x, dy, w.shape, 2, 1, 1) * 3.0 + 1.0
    np.testing.assert_allclose(big.numpy()[::2], ref, rtol=1e-5, atol=1e-4)
    assert (big.numpy()[1::2] == 0).all()
    plan = lt.explain(node * 3.0 + 1.0, source=False)
    assert "ConvBackward on cpu, wgrad" in plan and "im2col + one BLAS matmul per block of images" in plan
    # the copy of the transposed x, the step, then one fused kernel
    assert "plan: 3 steps" in plan and "contiguous copy for the convolution" in plan


def test_explain_shows_one_step_per_backward_conv():
    w = lt.asarray(np.ones((4, 3, 3, 2), np.float32))
    dy = lt.asarray(np.ones((1, 5, 5, 4), np.float32))
    text = lt.explain(lt.conv2d_backward_data(dy, w, (1, 5, 5, 2), padding=1), source=False)
    assert "plan: 1 step" in text and "dgrad: dx = conv2d_backward_data(dy, w)" in text


def test_bad_input_gets_clear_errors():
    w = lt.asarray(np.ones((4, 3, 3, 2), np.float32))
    dy = lt.asarray(np.ones((1, 5, 5, 4), np.float32))
    with pytest.raises(ValueError, match=r"dy has shape \(1, 5, 5, 4\), but conv2d of x \(1, 8, 8, 2\)"):
        lt.conv2d_backward_data(dy, w, (1, 8, 8, 2), padding=0)
    with pytest.raises(ValueError, match="x has 3 channels but w expects 2"):
        lt.conv2d_backward_data(dy, w, (1, 5, 5, 3), padding=1)
    with pytest.raises(TypeError, match="cast one so that both have the same dtype"):
        lt.conv2d_backward_data(dy, lt.asarray(np.ones((4, 3, 3, 2))), (1, 5, 5, 2), padding=1)
    with pytest.raises(TypeError, match="attrs must be the forward conv2d node's ConvAttrs"):
        lt.conv2d_backward_filter(lt.asarray(np.ones((1, 5, 5, 2), np.float32)), dy, (4, 3, 3, 2), (1, 1))
    with pytest.raises(ValueError, match="dy must be the gradient of that output"):
        conv2d_backward_filter_nhwc(np.ones((1, 5, 5, 2)), np.ones((1, 4, 4, 4)), (4, 3, 3, 2), 1, 1, 1)
    with pytest.raises(ValueError, match="out must be a C-contiguous float64 array of shape"):
        conv2d_backward_data_nhwc(np.ones((1, 5, 5, 4)), np.ones((4, 3, 3, 2)), (1, 5, 5, 2), 1, 1, 1,
                                  out=np.empty((1, 5, 5, 2), np.float32))


def test_relu_above_a_backward_conv_of_a_training_batch_norm_writes_no_mask_for_it():
    # relu(dgrad(batch_norm(...))) is no CBR pattern: the batch_norm's ReLU mask must stay unset
    rng = np.random.default_rng(5)
    x = lt.asarray(rng.standard_normal((2, 4, 4, 3)).astype(np.float32))
    saved = lt.BatchNormSaved()
    bn = lt.batch_norm(x, lt.ones(3, dtype=np.float32), lt.zeros(3, dtype=np.float32), lt.zeros(3, dtype=np.float32),
                       lt.ones(3, dtype=np.float32), training=True, saved=saved)
    w = lt.asarray(rng.standard_normal((3, 1, 1, 2)).astype(np.float32))
    out = lt.evaluate(lt.relu(lt.conv2d_backward_data(bn, w, (2, 4, 4, 2))))
    assert saved.relu_mask is None
    assert (out.numpy() >= 0).all()


def test_a_second_call_of_the_same_structure_reads_its_own_tensors():
    # the plan is kept as a recipe and rebound: the step must read the new tensors, not the first ones
    rng = np.random.default_rng(9)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    for _ in range(3):
        x = rng.standard_normal((2, 6, 5, 2)).astype(np.float32)
        dy = rng.standard_normal((2, 3, 3, 4)).astype(np.float32)
        dx = lt.evaluate(lt.conv2d_backward_data(lt.asarray(dy), lt.asarray(w), x.shape, stride=2, padding=1))
        dw = lt.evaluate(lt.conv2d_backward_filter(lt.asarray(x), lt.asarray(dy), w.shape, stride=2, padding=1))
        np.testing.assert_allclose(dx.numpy(), dgrad_reference(dy, w, x.shape, 2, 1, 1), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(dw.numpy(), wgrad_reference(x, dy, w.shape, 2, 1, 1), rtol=1e-5, atol=1e-5)
