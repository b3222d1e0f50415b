"""SyncBatchNorm: BatchNorm2d whose training statistics are the global batch's. Each rank sums x
and x*x over its shard; one all-reduce (a node of the step's plan) adds the ranks' sums, so 2 ranks
on half batches normalise as 1 rank on the whole batch; the backward's sums are all-reduced too (the
gradient of the all-reduce). Running statistics are written by lt.train_step, as the step's pairs.

Design: docs/design/distributed.md
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import ones, zeros
from lazytensor.distributed.group import world_size
from lazytensor.nn.module import Module
from lazytensor.ops.collectives import all_reduced
from lazytensor.ops.elementwise import sqrt
from lazytensor.ops.joining import stack
from lazytensor.ops.reductions import sum as sum_

_F32 = np.dtype(np.float32)


class SyncBatchNorm(Module):
    """BatchNorm2d over the channel (last) axis with statistics over every rank's batch (PyTorch's
    nn.SyncBatchNorm). In eval mode it normalises by the running statistics, as BatchNorm2d."""
    _params = ("weight", "bias")
    _buffers = ("running_mean", "running_var")

    def __init__(self, channels, eps=1e-5, momentum=0.1, device=None):
        self.weight = ones((channels,), np.float32, device)
        device = self.weight.device
        self.bias = zeros((channels,), np.float32, device)
        self.running_mean = zeros((channels,), np.float32, device)
        self.running_var = ones((channels,), np.float32, device)
        self.eps, self.momentum = eps, momentum
        self.state_updates = []

    def forward(self, x):
        if len(x.shape) < 2:
            raise ValueError(f"SyncBatchNorm expects x with a channel axis last, e.g. NHWC; got shape {tuple(x.shape)}")
        xf = x.astype(_F32) if x.dtype != _F32 else x
        if not self.training:
            y = (xf - self.running_mean) / sqrt(self.running_var + self.eps) * self.weight + self.bias
            return y.astype(x.dtype) if x.dtype != _F32 else y
        axes = tuple(range(len(x.shape) - 1))
        local = int(np.prod(x.shape[:-1]))
        sums = all_reduced(stack([sum_(xf, axis=axes), sum_(xf * xf, axis=axes)]), "sum", "SyncBatchNorm statistics")
        n = local * world_size()
        mean = sums[0] / n
        var = sums[1] / n - mean * mean
        y = (xf - mean) / sqrt(var + self.eps) * self.weight + self.bias
        m = self.momentum
        unbiased = var * (n / max(n - 1, 1))
        self.state_updates = [(self.running_mean, (1 - m) * self.running_mean + m * mean),
                              (self.running_var, (1 - m) * self.running_var + m * unbiased)]
        return y.astype(x.dtype) if x.dtype != _F32 else y


def convert_sync_batchnorm(model):
    """`model` with every BatchNorm2d replaced by a SyncBatchNorm holding its parameters and
    running statistics (PyTorch's nn.SyncBatchNorm.convert_sync_batchnorm); returns the model."""
    from lazytensor.nn.layers import BatchNorm2d
    for _, module in list(model.named_modules()):
        for name, value in list(vars(module).items()):
            if isinstance(value, BatchNorm2d):
                setattr(module, name, _sync_of(value))
            elif isinstance(value, list):
                value[:] = [_sync_of(v) if isinstance(v, BatchNorm2d) else v for v in value]
    return model


def _sync_of(bn):
    s = SyncBatchNorm.__new__(SyncBatchNorm)
    s.weight, s.bias, s.running_mean, s.running_var = bn.weight, bn.bias, bn.running_mean, bn.running_var
    s.eps, s.momentum, s.training, s.state_updates = bn.eps, bn.momentum, getattr(bn, "training", True), []
    return s
