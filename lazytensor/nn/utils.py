"""Gradient clipping by the global norm, as torch.nn.utils' get_total_norm and clip_grad_norm_.
The norm is one reduction over all gradients and the scaling is elementwise, so clipped
gradients handed to opt.step fuse into the update's kernels.

Design: docs/design/training-step.md, section "lazytensor/nn/optim.py".
"""
from __future__ import annotations

import math

import numpy as np

from lazytensor.core.tensor import Tensor, empty
from lazytensor.assign.simultaneous import assign
from lazytensor.ops.elementwise import abs as _abs, maximum, minimum, sqrt
from lazytensor.ops.reductions import max as _max, sum as _sum


def _wide(g):
    """16-bit gradients are reduced in float32 (their squares overflow float16 early)."""
    return g.astype(np.float32) if g.dtype.itemsize < 4 else g


def get_total_norm(grads, norm_type: float = 2.0):
    """The norm of all gradients together, as if concatenated into one vector (a lazy 0-d value).
    norm_type: a positive float, or inf for the largest absolute value."""
    grads = list(grads)
    if not grads:
        raise ValueError("get_total_norm: no gradients")
    p = float(norm_type)
    if p == math.inf:
        total = _max(_abs(_wide(grads[0])))
        for g in grads[1:]:
            total = maximum(total, _max(_abs(_wide(g))))
        return total
    if not p > 0:
        raise ValueError(f"norm_type must be positive or inf; got {norm_type}")
    powered = [_sum(_abs(_wide(g)) ** p) if p != 2.0 else _sum(_wide(g) * _wide(g)) for g in grads]
    total = powered[0]
    for s in powered[1:]:
        total = total + s
    return sqrt(total) if p == 2.0 else total ** (1.0 / p)


def clip_grad_norm(grads, max_norm: float, norm_type: float = 2.0):
    """(clipped gradients, total norm): each gradient times min(1, max_norm / (total + 1e-6)),
    PyTorch's rule. Lazy: hand the clipped gradients to opt.step and it stays one plan."""
    grads = list(grads)
    total = get_total_norm(grads, norm_type)
    coefficient = minimum(float(max_norm) / (total + 1e-6), 1.0)
    return [g * coefficient.astype(g.dtype) for g in grads], total


def clip_grad_norm_(grads, max_norm: float, norm_type: float = 2.0):
    """torch.nn.utils.clip_grad_norm_ for gradients held in Tensors: scales them in place (one
    simultaneous write) and returns the total norm before clipping."""
    grads = list(grads)
    for i, g in enumerate(grads):
        if not isinstance(g, Tensor):
            raise TypeError(f"clip_grad_norm_ writes gradient {i} in place, so it must be a Tensor; got "
                            f"{type(g).__name__}: for lazy gradients (lt.grad's) use "
                            f"`grads, norm = lt.nn.utils.clip_grad_norm(grads, max_norm)`")
    clipped, total = clip_grad_norm(grads, max_norm, norm_type)
    norm = empty((), total.dtype, total.device)
    assign([(norm, total), *zip(grads, clipped)])     # simultaneous: the norm reads the gradients before
    return norm
