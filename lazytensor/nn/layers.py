"""The layers of convolutional networks, NHWC, with PyTorch's default initialisation.

Weights are stored in lazytensor's layouts (conv KRSC, activations NHWC); state dicts convert to and
from PyTorch's (KCRS, NCHW) so a torch model's weights can be brought over as NumPy arrays.
"""
from __future__ import annotations

import math

import numpy as np

from lazytensor.core.tensor import ones, zeros
from lazytensor.nn.module import Module, parameter
from lazytensor.ops.conv_bn import BatchNormSaved, batch_norm, conv2d
from lazytensor.ops.elementwise import relu


def _pair(v) -> tuple:
    return (v, v) if isinstance(v, int) else tuple(v)


def _uniform(rng, bound: float, shape) -> np.ndarray:
    return rng.uniform(-bound, bound, shape)


class Conv2d(Module):
    """PyTorch's nn.Conv2d on NHWC: weight (K, R, S, C); default init kaiming_uniform(a=sqrt(5)),
    i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the weight and the bias."""
    _params = ("weight", "bias")

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, bias=True,
                 dtype=np.float32, device=None, rng=None):
        rng = rng or np.random.default_rng(0)
        r, s = _pair(kernel_size)
        fan_in = in_channels * r * s
        bound = 1.0 / math.sqrt(fan_in)
        self.weight = parameter(_uniform(rng, bound, (out_channels, r, s, in_channels)), dtype, device)
        device = self.weight.device
        self.bias = parameter(_uniform(rng, bound, (out_channels,)), dtype, device) if bias else None
        if not bias:
            self._params = ("weight",)
        self.stride, self.padding, self.dilation = stride, padding, dilation

    def forward(self, x):
        return conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation)

    def to_torch_layout(self, name, value):
        return value.transpose(0, 3, 1, 2) if name == "weight" else value

    def from_torch_layout(self, name, value):
        return value.transpose(0, 2, 3, 1) if name == "weight" else value


class BatchNorm2d(Module):
    """PyTorch's nn.BatchNorm2d over the channel (last) axis: weight 1, bias 0, running mean 0 and
    variance 1, all float32 whatever the activations' dtype (AMP keeps BN in float32)."""
    _params = ("weight", "bias")
    _buffers = ("running_mean", "running_var")

    def __init__(self, channels, eps=1e-5, momentum=0.1, device=None):
        self.weight = ones((channels,), np.float32, device)
        device = self.weight.device
        self.bias = zeros((channels,), np.float32, device)
        self.running_mean = zeros((channels,), np.float32, device)
        self.running_var = ones((channels,), np.float32, device)
        self.eps, self.momentum = eps, momentum
        self.saved = BatchNormSaved()

    def forward(self, x):
        if self.training:
            self.saved = BatchNormSaved()
        return batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var, training=self.training,
                          momentum=self.momentum, eps=self.eps, saved=self.saved)


class ReLU(Module):
    def forward(self, x):
        return relu(x)


class ConvBNReLU(Module):
    """Conv2d (no bias) -> BatchNorm2d -> ReLU: the pattern the planner runs as the fused CBR path."""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=1, dtype=np.float32,
                 device=None, rng=None):
        self.conv = Conv2d(in_channels, out_channels, kernel_size, stride, padding, bias=False, dtype=dtype,
                           device=device, rng=rng)
        self.bn = BatchNorm2d(out_channels, device=self.conv.weight.device)

    def forward(self, x):
        return relu(self.bn(self.conv(x)))


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        from lazytensor.ops.pooling import max_pool2d
        return max_pool2d(x, self.kernel_size, self.stride, self.padding)


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        from lazytensor.ops.pooling import avg_pool2d
        return avg_pool2d(x, self.kernel_size, self.stride, self.padding)


class GlobalAvgPool(Module):
    """Mean over H and W of NHWC: (N, H, W, C) -> (N, C) (PyTorch's AdaptiveAvgPool2d(1) + flatten)."""

    def forward(self, x):
        return x.mean(axis=(1, 2)).astype(x.dtype)


class Flatten(Module):
    """(N, H, W, C) -> (N, H*W*C), in NHWC order. A Linear after it converts PyTorch's weights,
    whose columns follow NCHW order, through its `nchw_input` (C, H, W)."""

    def forward(self, x):
        return x.reshape(x.shape[0], -1)


class Linear(Module):
    """PyTorch's nn.Linear: weight (out, in), y = x @ weight.T + bias; default init
    U(-1/sqrt(in), 1/sqrt(in)). nchw_input=(C, H, W): the input is an NHWC feature map flattened,
    and a PyTorch weight's columns (in NCHW order) are permuted to NHWC order on loading."""
    _params = ("weight", "bias")

    def __init__(self, in_features, out_features, bias=True, dtype=np.float32, device=None, rng=None,
                 nchw_input=None):
        rng = rng or np.random.default_rng(0)
        bound = 1.0 / math.sqrt(in_features)
        self.weight = parameter(_uniform(rng, bound, (out_features, in_features)), dtype, device)
        device = self.weight.device
        self.bias = parameter(_uniform(rng, bound, (out_features,)), dtype, device) if bias else None
        if not bias:
            self._params = ("weight",)
        self.nchw_input = nchw_input

    def forward(self, x):
        from lazytensor.ops.matmul import matmul
        y = matmul(x, self.weight.T)
        return y if self.bias is None else (y + self.bias).astype(y.dtype)

    def _columns(self, value, to_torch: bool):
        if self.nchw_input is None:
            return value
        c, h, w = self.nchw_input
        out = value.shape[0]
        if to_torch:
            return value.reshape(out, h, w, c).transpose(0, 3, 1, 2).reshape(out, -1)
        return value.reshape(out, c, h, w).transpose(0, 2, 3, 1).reshape(out, -1)

    def to_torch_layout(self, name, value):
        return self._columns(value, True) if name == "weight" else value

    def from_torch_layout(self, name, value):
        return self._columns(value, False) if name == "weight" else value


class Sequential(Module):
    def __init__(self, *layers):
        self.layers = list(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self):
        return len(self.layers)
