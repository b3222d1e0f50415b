"""CBR: a Conv + BatchNorm + ReLU block holding its weights, BN parameters and running statistics,
for experiments: `block = lt.cbr.CBR(64, 64, 3, padding=1); y = block(x)` (train mode by default)."""
from __future__ import annotations

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.assign.evaluate import evaluate
from lazytensor.ops.elementwise import relu
from lazytensor.ops.conv_bn import BatchNormSaved, batch_norm, conv2d


class CBR:
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 momentum=0.1, eps=1e-5, dtype=np.float32, device=None, seed=0):
        r, s = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        rng = np.random.default_rng(seed)
        fan_in = in_channels * r * s
        w = rng.standard_normal((out_channels, r, s, in_channels)) * np.sqrt(2.0 / fan_in)   # He init
        self.weight = _tensor.asarray(w.astype(dtype), device=device)
        device = self.weight.device
        self.gamma = _tensor.ones((out_channels,), np.float32, device)
        self.beta = _tensor.zeros((out_channels,), np.float32, device)
        self.running_mean = _tensor.zeros((out_channels,), np.float32, device)
        self.running_var = _tensor.ones((out_channels,), np.float32, device)
        self.stride, self.padding, self.dilation = stride, padding, dilation
        self.momentum, self.eps = momentum, eps
        self.training = True
        self.saved = BatchNormSaved()     # saved statistics and ReLU mask of the last training call

    def train(self, mode: bool = True) -> "CBR":
        self.training = mode
        return self

    def eval(self) -> "CBR":
        return self.train(False)

    def expression(self, x, fused=None):
        """The lazy relu(batch_norm(conv2d(x))) of this block, to assign or to build on."""
        self.saved = BatchNormSaved() if self.training else self.saved
        y = conv2d(x, self.weight, stride=self.stride, padding=self.padding, dilation=self.dilation)
        y = batch_norm(y, self.gamma, self.beta, self.running_mean, self.running_var, training=self.training,
                       momentum=self.momentum, eps=self.eps, saved=self.saved, fused=fused)
        return relu(y)

    def __call__(self, x, fused=None):
        return evaluate(self.expression(x, fused))

    def __repr__(self):
        k, r, s, c = self.weight.shape
        return (f"CBR({c} -> {k}, kernel {r}x{s}, stride {self.stride}, padding {self.padding}, "
                f"{'train' if self.training else 'eval'}, {self.weight.dtype.name}, device={self.weight.device!r})")
