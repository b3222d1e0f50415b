"""Optimizers with PyTorch's update rules: SGD (momentum, dampening, nesterov, weight decay) and AdamW.

`step(grads)` takes one gradient per parameter, as `lt.grad` returns them: lazy expressions, so each
parameter's update fuses with the last elementwise work of its gradient, and the new state and the
new parameter of every parameter are written by ONE simultaneous assignment: the work the gradients
share (the forward, the backward down to each layer) runs once, and each update fuses with its
gradient's last elementwise kernel.

Mixed precision: a float16 parameter gets a float32 master copy; the update runs on the master and
the parameter receives its float16 rounding (PyTorch AMP's practice with fp32 master weights).
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import Tensor, empty, zeros
from lazytensor.ops.elementwise import sqrt
from lazytensor.plan.simultaneous import assign
from lazytensor.plan.steps import interrupts_deferred

_F32 = np.dtype(np.float32)


class Optimizer:
    def __init__(self, params, lr: float):
        self.params = list(params)
        if not self.params:
            raise ValueError("the optimizer got no parameters")
        for p in self.params:
            if not isinstance(p, Tensor) or p.dtype.kind != "f":
                raise TypeError(f"parameters must be floating-point Tensors; got {p!r}")
        self.lr = float(lr)
        self.steps = 0
        self.master = [self._master_of(p) for p in self.params]

    @staticmethod
    def _master_of(p: Tensor):
        if p.dtype.itemsize >= 4:
            return None
        m = empty(p.shape, np.float32, p.device)
        m[...] = p.astype(np.float32)
        return m

    def _check(self, grads) -> list:
        grads = list(grads)
        if len(grads) != len(self.params):
            raise ValueError(f"step() takes one gradient per parameter: {len(self.params)} parameters, "
                             f"{len(grads)} gradients")
        for i, (p, g) in enumerate(zip(self.params, grads)):
            if tuple(g.shape) != tuple(p.shape):
                raise ValueError(f"gradient {i} has shape {tuple(g.shape)}, its parameter {tuple(p.shape)}")
        return grads

    def step(self, grads) -> None:
        grads = self._check(grads)
        # Ctrl-C during the step arrives after it: every parameter and moment updated, never some.
        with interrupts_deferred():
            self.steps += 1
            writes = []
            for i, (p, g) in enumerate(zip(self.params, grads)):
                master = self.master[i]
                weights = p if master is None else master
                mine = self._update(i, weights, g.astype(weights.dtype) if g.dtype != weights.dtype else g)
                if master is not None:
                    mine.append((p, mine[-1][1].astype(p.dtype)))
                writes += mine
            # ONE simultaneous assignment of every parameter: the gradients share their forward and
            # backward work, which one plan computes once (one assignment per parameter would
            # recompute it for each), and each update fuses with its gradient's last kernel.
            assign(writes)

    def _update(self, i: int, w, g) -> list:
        """[(tensor, its new value), ...] for parameter i, the weights last."""
        raise NotImplementedError


class SGD(Optimizer):
    """PyTorch's torch.optim.SGD: g += weight_decay * w; buf = momentum * buf + (1 - dampening) * g
    (buf = g on the first step); g = g + momentum * buf if nesterov else buf; w -= lr * g."""

    def __init__(self, params, lr: float, momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False):
        super().__init__(params, lr)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("nesterov momentum needs momentum > 0 and dampening 0")
        self.momentum, self.dampening = float(momentum), float(dampening)
        self.weight_decay, self.nesterov = float(weight_decay), nesterov
        self.buffers = [zeros(p.shape, _F32 if m is not None else p.dtype, p.device) if momentum else None
                        for p, m in zip(self.params, self.master)]

    def _update(self, i, w, g):
        if self.weight_decay:
            g = g + self.weight_decay * w
        writes = []
        if self.momentum:
            buf = self.buffers[i]
            new_buf = g if self.steps == 1 else self.momentum * buf + (1.0 - self.dampening) * g
            writes.append((buf, new_buf))
            g = g + self.momentum * new_buf if self.nesterov else new_buf
        writes.append((w, w - self.lr * g))
        return writes


class AdamW(Optimizer):
    """PyTorch's torch.optim.AdamW: w *= 1 - lr * weight_decay; m = b1 m + (1 - b1) g;
    v = b2 v + (1 - b2) g^2; w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2):
        super().__init__(params, lr)
        self.b1, self.b2 = (float(b) for b in betas)
        self.eps, self.weight_decay = float(eps), float(weight_decay)
        self.m = [zeros(p.shape, _F32 if mm is not None else p.dtype, p.device) for p, mm in zip(self.params, self.master)]
        self.v = [zeros(p.shape, _F32 if mm is not None else p.dtype, p.device) for p, mm in zip(self.params, self.master)]

    def _update(self, i, w, g):
        t = self.steps
        m = self.b1 * self.m[i] + (1.0 - self.b1) * g
        v = self.b2 * self.v[i] + (1.0 - self.b2) * (g * g)
        step_size = self.lr / (1.0 - self.b1 ** t)
        denom = sqrt(v) / float(np.sqrt(1.0 - self.b2 ** t)) + self.eps
        decayed = w * (1.0 - self.lr * self.weight_decay) if self.weight_decay else w
        return [(self.m[i], m), (self.v[i], v), (w, decayed - step_size * (m / denom))]

