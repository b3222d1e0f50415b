"""Gradient rules of the heavy CBR nodes on the unfused path: conv2d, its two backward nodes, batch_norm.

Design: docs/design/cbr-backward.md, section "lazytensor/autodiff/rules_conv_bn.py".
"""
from __future__ import annotations

import math

import numpy as np

from lazytensor.autodiff.rules import gradient_rule
from lazytensor.ops.conv_backward import conv2d_backward_data, conv2d_backward_filter
from lazytensor.ops.conv_bn import conv2d
from lazytensor.ops.elementwise import sqrt
from lazytensor.ops.reductions import reduce
from lazytensor.ops.views import broadcast_to


def output_gradient(node, grad):
    """`grad` as an operand of `node`'s shape and dtype (the heavy backward nodes read it whole)."""
    if tuple(grad.shape) != tuple(node.shape):
        grad = broadcast_to(grad, node.shape)
    return grad.astype(node.dtype)


def _conv_keywords(attrs) -> dict:
    return {"stride": attrs.stride, "padding": attrs.padding, "dilation": attrs.dilation}


@gradient_rule("conv2d")
def conv2d_gradient(node, grad):
    x, w = node.args
    g = output_gradient(node, grad)
    return (conv2d_backward_data(g, w, x.shape, node.attrs),
            conv2d_backward_filter(x, g, w.shape, node.attrs))


@gradient_rule("conv2d_backward_data")
def conv2d_backward_data_gradient(node, grad):
    dy, w = node.args                   # node = dx, linear in dy and in w
    g = output_gradient(node, grad)     # shaped like the forward conv's x
    return (conv2d(g, w, **_conv_keywords(node.attrs)),
            conv2d_backward_filter(g, dy, w.shape, node.attrs))


@gradient_rule("conv2d_backward_filter")
def conv2d_backward_filter_gradient(node, grad):
    x, dy = node.args                   # node = dw, linear in x and in dy
    g = output_gradient(node, grad)     # shaped like the forward conv's w
    return (conv2d_backward_data(dy, g, x.shape, node.attrs),
            conv2d(x, g, **_conv_keywords(node.attrs)))


@gradient_rule("batch_norm")
def batch_norm_gradient(node, grad):
    """(dx, dgamma, dbeta, None, None): float16 and float32 x are computed in float32, float64 in
    float64; dx has x's dtype, dgamma and dbeta gamma's and beta's (float32)."""
    x, gamma, beta, running_mean, running_var = node.args
    a = node.attrs
    compute = np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)
    axes = tuple(range(len(x.shape) - 1))      # all but the channel axis
    g = output_gradient(node, grad).astype(compute)
    xc = x.astype(compute)
    if a.training:
        mean = reduce("mean", xc, axes)
        inv_std = 1.0 / sqrt(reduce("var", xc, axes) + a.eps)
    else:
        mean = running_mean.astype(compute)
        inv_std = 1.0 / sqrt(running_var.astype(compute) + a.eps)
    xhat = (xc - mean) * inv_std
    dbeta = reduce("sum", g, axes)
    dgamma = reduce("sum", g * xhat, axes)
    if a.training:
        count = math.prod(x.shape[:-1])
        dx = (gamma * inv_std) * (g - dbeta * (1.0 / count) - xhat * (dgamma * (1.0 / count)))
    else:
        dx = g * (gamma * inv_std)
    return (dx.astype(x.dtype), dgamma.astype(gamma.dtype), dbeta.astype(beta.dtype), None, None)
