"""Convs with channel counts cuDNN refuses (C=3 first layers, K=10 classifiers) run on zero-padded
channels (lazytensor.plan.conv.channel_padding): the rule that picks them, and the padded forward, wgrad
and dgrad against NumPy references, run through the CPU stand-in of the inner step (the padding,
the copies and the slicing are the same on CUDA, where the inner step is cuDNN's)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.conv_grad_reference import conv_cases, dgrad_reference, wgrad_reference
from lazytensor.cbr.conv_args import as_pair, conv_output_shape
from lazytensor.cbr.conv_reference import conv2d_nhwc_reference
from lazytensor.kernels.backend import backend_for
from lazytensor.ops.conv_bn import ConvAttrs
from lazytensor.plan.conv.channel_padding import channels_only_refusal, padded_backward, padded_forward


@pytest.mark.parametrize("x_shape, w_shape, dtype, padded", [
    ((16, 8, 8, 3), (8, 3, 3, 3), np.float16, True),         # a first layer
    ((16, 8, 8, 16), (10, 1, 1, 16), np.float16, True),      # a classifier
    ((16, 8, 8, 8), (16, 3, 3, 8), np.float16, False),       # cuDNN takes it as it is
    ((16, 8, 8, 3), (8, 3, 3, 3), np.float32, True),         # a float32 first layer: padded as well
    ((16, 8, 8, 16), (10, 1, 1, 16), np.float64, True),      # every cuDNN conv dtype
    ((16, 8, 8, 3), (8, 3, 3, 3), np.int32, False),          # padding cannot fix the dtype
])
def test_padding_is_chosen_where_only_the_channels_are_refused(x_shape, w_shape, dtype, padded):
    assert channels_only_refusal(x_shape, w_shape, dtype) is padded


def _attrs(stride, padding, dilation):
    return ConvAttrs(as_pair(stride, "stride"), as_pair(padding, "padding"), as_pair(dilation, "dilation"))


def _run_twice(step):
    """Runs the step, spoils its padded buffers (the memory plan may lend them to other temporaries
    between runs), runs it again: the second result must not depend on what they held."""
    step.run()
    for _, buffer, _ in step.pads:
        buffer.fill(np.nan)
    step.run()


@settings(max_examples=25, deadline=None)
@given(conv_cases(max_c=11), st.sampled_from(["forward", "wgrad", "dgrad"]))
def test_padded_convs_equal_the_unpadded_references(case, kind):
    x_shape, w_shape, stride, padding, dilation, seed = case
    rng = np.random.default_rng(seed)
    backend, attrs = backend_for("cpu"), _attrs(stride, padding, dilation)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    y_shape = conv_output_shape(x_shape, w_shape, stride, padding, dilation)
    dy = rng.standard_normal(y_shape)
    if kind == "forward":
        out, want = np.empty(y_shape), conv2d_nhwc_reference(x, w, stride, padding, dilation)
        step = padded_forward(backend, x, w, attrs, out, path="cpu")
    elif kind == "wgrad":
        out, want = np.empty(w_shape), wgrad_reference(x, dy, w_shape, stride, padding, dilation)
        step = padded_backward(backend, "wgrad", x, dy, x_shape, w_shape, attrs, out, path="cpu")
    else:
        out, want = np.empty(x_shape), dgrad_reference(dy, w, x_shape, stride, padding, dilation)
        step = padded_backward(backend, "dgrad", dy, w, x_shape, w_shape, attrs, out, path="cpu")
    _run_twice(step)
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-10)
    text = step.describe()
    for name, n in (("C", x_shape[-1]), ("K", w_shape[0])):
        assert (f"{name} {n} -> " in text) == bool(n % 8), text


def test_explain_says_which_channels_were_padded():
    backend, attrs = backend_for("cpu"), _attrs(1, 1, 1)
    x, w = np.zeros((2, 5, 5, 3), np.float32), np.zeros((10, 3, 3, 3), np.float32)
    step = padded_forward(backend, x, w, attrs, np.empty((2, 5, 5, 10), np.float32), path="cpu")
    text = step.describe()
    assert text.startswith("ChannelPadded: channels zero-padded for cuDNN (C 3 -> 8, K 10 -> 16)"), text
    assert "cuDNN path not taken for the conv as it is: " in text, text
    assert step.path == "cudnn-padded"     # the batch_norm planner reads it: not "cudnn", so no stage-1 timing
    assert "(2, 5, 5, 8) * (16, 3, 3, 8) -> (2, 5, 5, 16)" in text, text


def test_a_padded_step_rebuilt_over_the_memory_plans_arena_still_pads_with_zeros():
    from lazytensor.step.memory_plan import MemoryPlan
    rng = np.random.default_rng(0)
    backend, attrs = backend_for("cpu"), _attrs(1, 1, 1)
    x, w = rng.standard_normal((2, 6, 5, 3)), rng.standard_normal((10, 3, 3, 3))
    out = np.empty((2, 6, 5, 10))
    plan = MemoryPlan([padded_forward(backend, x, w, attrs, out, path="cpu")], [], [out, x, w], backend)
    assert plan.temporaries == 3             # padded x, padded w, padded y: in the arena
    plan.memory.view(np.float64)[:] = np.nan     # what other temporaries may leave there
    plan.steps[0].run()
    np.testing.assert_allclose(out, conv2d_nhwc_reference(x, w, 1, 1, 1), rtol=1e-10, atol=1e-10)
