"""The fused CBR backward, stage 1: drelu + dBN over a training forward's saved results.

Design: docs/design/cbr-backward.md, section "lazytensor/ops/cbr_backward.py".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lazytensor.core.expr import Expr
from lazytensor.ops.conv_bn import BatchNormSaved, _tensor_operand
from lazytensor.ops.forward_saved import forward_saved


_CONSTANTS: dict = {}   # (device, what) -> a small constant Tensor the stage-1 kernels read


def _constant(device, what):
    """bits: [1, 2, 4, ..., 128] (uint8): a kernel reads bit b of mask byte j as mask[j] & bits[b].
    lanes: [False, True]: the two lanes of the dBN sums (sum dY', sum dY' * x_hat).
    Operands of the nodes, not arrays made by the plan, so that a plan recipe rebinds them as inputs."""
    t = _CONSTANTS.get((device, what))
    if t is None:
        from lazytensor.core.tensor import asarray
        value = np.array([1 << b for b in range(8)], np.uint8) if what == "bits" else np.array([False, True])
        t = _CONSTANTS[(device, what)] = asarray(value, device=device)
    return t


@dataclass(frozen=True)
class CbrBackwardAttrs:
    relu: bool          # dY' = dY * mask (else dY' = dY)
    count: int          # values per channel: N * P * Q


def _checked_dy(dy, conv_out, what):
    dy = _tensor_operand(dy, "dy", conv_out.device)
    if tuple(dy.shape) != tuple(conv_out.shape):
        raise ValueError(f"{what}: dy has shape {tuple(dy.shape)}, but the forward's output has shape "
                         f"{tuple(conv_out.shape)}; dy must be the gradient of that output")
    if dy.device != conv_out.device:
        raise ValueError(f"{what}: dy is on {dy.device!r} but the forward ran on {conv_out.device!r}")
    if dy.dtype != conv_out.dtype:
        dy = dy.astype(conv_out.dtype)
    return dy


def sums_write_skip(dy) -> bool:
    """Whether the dBN sums' pass may write d(skip) from the dY and mask it reads: the vectorized
    CUDA kernels (float16, K a multiple of 8). The sums node is then d(skip)'s operand, and a plan
    of d(skip) plans the sums (needed for every other gradient of the block anyway); elsewhere d(skip)
    is a kernel of its own, which a plan of d(skip) alone runs without the sums."""
    if dy.device == "cpu":
        return False
    from lazytensor.plan.conv.dbn_cuda import vector_refusal     # the CUDA kernels' module: not on import
    return vector_refusal(dy.dtype, tuple(dy.shape), ()) is None


def cbr_bn_backward(dy, saved: BatchNormSaved, gamma, relu: bool = True, residual: bool = False):
    """Stage 1 of the CBR backward (see the module doc): (d_conv_out, dgamma, dbeta, d_skip)."""
    what = "cbr_bn_backward"
    if not isinstance(saved, BatchNormSaved):
        raise TypeError(f"{what}: saved must be the forward batch_norm's BatchNormSaved; got {type(saved).__name__}")
    if residual and not relu:
        raise ValueError(f"{what}: residual=True is the form relu(batch_norm(...) + skip); it needs relu=True")
    found = saved.forward_results(relu, what)
    return _stage1(dy, found["conv_out"], found["saved_mean"], found["saved_inv_var"],
                   found["relu_mask"] if relu else None, gamma, residual, what)


def cbr_bn_backward_in_plan(dy, bn, root, gamma, relu: bool = True, residual: bool = False, mask=None):
    """Stage 1 over a training forward that has not run: the same nodes as cbr_bn_backward, reading
    the conv2d node (bn's operand) for the conv output and forward_saved nodes for the statistics
    and the mask (root: the relu whose mask is read), so that one plan runs the forward, then this
    backward, reading what the forward's steps wrote (lazytensor.ops.forward_saved). mask: the ReLU
    mask to read instead of root's (see masked_gradient)."""
    if relu and mask is None:
        mask = forward_saved(root, "relu_mask")
    return _stage1(dy, bn.args[0], forward_saved(bn, "saved_mean"), forward_saved(bn, "saved_inv_var"),
                   mask if relu else None, gamma, residual, "cbr_bn_backward")


def cbr_bn_backward_masked(dy, mask, saved: BatchNormSaved, gamma):
    """Stage 1 of batch_norm(conv2d(...)) whose output gradient is dY * mask, from an evaluated
    forward's holder (its own results; the mask is another relu's): see masked_gradient."""
    found = saved.forward_results(False, "cbr_bn_backward")
    return _stage1(dy, found["conv_out"], found["saved_mean"], found["saved_inv_var"], mask, gamma, False,
                   "cbr_bn_backward")


def masked_gradient(grad):
    """(dY, mask) where `grad` is d(skip) = dY * mask of a residual block (a cbr_drelu node), else None.
    The batch_norm of the skip branch (a downsample) then reads dY and the 1-bit mask itself, as the
    relu form does: d(skip) is never written, and its dBN reads 1/16 of the bytes for the mask."""
    if isinstance(grad, Expr) and grad.op == "cbr_drelu" and grad.attrs.relu:
        return grad.args[0], grad.args[1]
    return None


def _stage1(dy, conv_out, mean, inv_var, relu_mask, gamma, residual, what):
    relu = relu_mask is not None
    dy = _checked_dy(dy, conv_out, what)
    gamma = _tensor_operand(gamma, "gamma", conv_out.device)
    k = conv_out.shape[-1]
    if tuple(gamma.shape) != (k,):
        raise ValueError(f"{what}: gamma must have shape ({k},), one value per channel; got {tuple(gamma.shape)}")
    count = 1
    for d in conv_out.shape[:-1]:
        count *= d
    attrs = CbrBackwardAttrs(relu, count)
    mask = (relu_mask, _constant(conv_out.device, "bits")) if relu else ()
    stats = (mean, inv_var)
    f32 = np.dtype(np.float32)
    sums = Expr("cbr_dbn_sums", (dy, conv_out, *stats, _constant(conv_out.device, "lanes"), *mask), (k, 2), f32, conv_out.device, heavy=True,
                attrs=attrs)
    d_conv = Expr("cbr_dbn_dx", (dy, conv_out, *stats, gamma.astype(f32), sums, *mask), tuple(conv_out.shape),
                  conv_out.dtype, conv_out.device, heavy=True, attrs=attrs)
    d_skip = None
    if residual:
        by_sums = (sums,) if sums_write_skip(dy) else ()
        d_skip = Expr("cbr_drelu", (dy, *mask, *by_sums), tuple(dy.shape), dy.dtype, dy.device, heavy=True,
                      attrs=attrs)
    return d_conv, sums[:, 1], sums[:, 0], d_skip
