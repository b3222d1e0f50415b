"""The two backward convolutions, as heavy nodes: the adjoints of conv2d in its data and its filter.

    conv2d_backward_data(dy, w, x_shape, attrs)    dx (N, H, W, C): the gradient reaching x (dgrad)
    conv2d_backward_filter(x, dy, w_shape, attrs)  dw (K, R, S, C): the gradient reaching w (wgrad)

dy is the gradient of conv2d(x, w)'s output (N, P, Q, K); attrs are that conv's stride, padding and
dilation (a ConvAttrs, or the keywords). The planner (lazytensor.plan.conv.conv_backward) runs each
as one step: per-tap BLAS on the CPU, a cuDNN conv_dgrad / conv_wgrad graph on CUDA. They are what
the conv2d gradient rule (lazytensor.autodiff.rules_conv_bn) builds, and are linear in each operand,
so they have gradient rules too (second derivatives).
"""
from __future__ import annotations

from dataclasses import dataclass

from lazytensor.core.expr import Expr
from lazytensor.ops.conv_bn import ConvAttrs, _checked_conv, _tensor_operand, device_refusal
from lazytensor.plan.conv.conv_backward import FIRST_LAYER_NOTE


@dataclass(frozen=True)
class FirstLayerWgradAttrs(ConvAttrs):
    """The attrs of a wgrad whose forward conv reads training data (the first layer): no dgrad is
    planned beside it, and explain says so."""
    note: str = FIRST_LAYER_NOTE


def _conv_attrs(attrs, stride, padding, dilation, x_shape, w_shape, dtype_a, dtype_b, what):
    """The forward conv's checked arguments (the same checks and errors as conv2d) and its ConvAttrs."""
    if attrs is not None:
        if not isinstance(attrs, ConvAttrs):
            raise TypeError(f"{what}: attrs must be the forward conv2d node's ConvAttrs (node.attrs); "
                            f"got {type(attrs).__name__}; or leave it out and pass stride, padding, dilation")
        stride, padding, dilation = attrs.stride, attrs.padding, attrs.dilation
    checked = _checked_conv(x_shape, w_shape, dtype_a, dtype_b, stride, padding, dilation)
    return checked, ConvAttrs(checked.stride, checked.padding, checked.dilation)


def _check_dy(dy, checked, x_shape, w_shape, what):
    if tuple(dy.shape) != checked.out_shape:
        raise ValueError(f"{what}: dy has shape {tuple(dy.shape)}, but conv2d of x {tuple(x_shape)} by w "
                         f"{tuple(w_shape)} (stride {checked.stride}, padding {checked.padding}, dilation "
                         f"{checked.dilation}) has output shape {checked.out_shape}; dy must be the gradient "
                         "of that output")


def _same_device(a, b, names, what):
    if a.device != b.device:
        raise ValueError(f"{what}: {names[0]} is on {a.device!r} but {names[1]} is on {b.device!r}; "
                         f"move one with lt.asarray(..., device={a.device!r})")


def conv2d_backward_data(dy, w, x_shape, attrs: ConvAttrs | None = None, *, stride=1, padding=0, dilation=1):
    """dx[n, h, v, c] = sum of dy[n, p, q, k] * w[k, r, s, c] over h = p*sh + r*dh - ph, v = q*sw + s*dw - pw:
    the gradient of sum(conv2d(x, w) * dy) with respect to x, of shape x_shape and dy's dtype."""
    what = "conv2d_backward_data"
    dy = _tensor_operand(dy, "dy")
    w = _tensor_operand(w, "w", dy.device)
    x_shape = tuple(int(d) for d in x_shape)
    checked, attrs = _conv_attrs(attrs, stride, padding, dilation, x_shape, tuple(w.shape), dy.dtype, w.dtype, what)
    _check_dy(dy, checked, x_shape, w.shape, what)
    _same_device(dy, w, ("dy", "w"), what)
    device_refusal(what, dy)
    return Expr("conv2d_backward_data", (dy, w), x_shape, dy.dtype, dy.device, heavy=True, attrs=attrs)


def conv2d_backward_filter(x, dy, w_shape, attrs: ConvAttrs | None = None, *, stride=1, padding=0, dilation=1,
                           first_layer: bool = False):
    """dw[k, r, s, c] = sum over n, p, q of dy[n, p, q, k] * x[n, p*sh + r*dh - ph, q*sw + s*dw - pw, c]:
    the gradient of sum(conv2d(x, w) * dy) with respect to w, of shape w_shape and x's dtype (float16
    activations give a float16 dw, accumulated in float32). first_layer: x is training data, no dgrad
    is planned with it (explain says so)."""
    what = "conv2d_backward_filter"
    x = _tensor_operand(x, "x")
    dy = _tensor_operand(dy, "dy", x.device)
    w_shape = tuple(int(d) for d in w_shape)
    checked, attrs = _conv_attrs(attrs, stride, padding, dilation, tuple(x.shape), w_shape, x.dtype, dy.dtype, what)
    _check_dy(dy, checked, x.shape, w_shape, what)
    _same_device(x, dy, ("x", "dy"), what)
    device_refusal(what, x)
    if first_layer:
        attrs = FirstLayerWgradAttrs(attrs.stride, attrs.padding, attrs.dilation)
    return Expr("conv2d_backward_filter", (x, dy), w_shape, x.dtype, x.device, heavy=True, attrs=attrs)
