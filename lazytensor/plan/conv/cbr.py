"""Planning conv2d and batch_norm: the CBR (Conv + BatchNorm + ReLU) path.

Design: docs/design/cbr.md, section "lazytensor/plan/conv/cbr.py".
"""
from __future__ import annotations

import math

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import Expr, apply
from lazytensor.kernels.config import host_or_raise
from lazytensor.kernels.ops import OPS
from lazytensor.kernels.program import with_relu_mask
from lazytensor.core.memory import may_overlap
from lazytensor.plan.conv.channel_padding import cudnn_after_padding, padded_forward
from lazytensor.plan.conv.operands import contiguous, conv_operands
from lazytensor.plan.conv.stage1 import REDUCTION, choose_stage1, genstats_refusal, statistics_step
from lazytensor.plan.conv.steps import CommitStep, Conv2dStep, FinalizeStep, InferenceGraphStep
from lazytensor.plan.elementwise import aliased, copy_step
from lazytensor.plan.lower import lower
from lazytensor.plan.steps import FusedElementwise

_F32 = np.dtype(np.float32)


# -- choices ---------------------------------------------------------------------------------------

def cudnn_refusal(x, w) -> str | None:
    """Why the cuDNN path cannot take this conv, or None."""
    from lazytensor.cbr.cudnn_support import cudnn_shape_refusal, cudnn_unavailable_reason
    return cudnn_unavailable_reason() or cudnn_shape_refusal(x.shape, w.shape, x.dtype)


def _conv_step(backend, x, w, attrs, y, fused):
    if backend.host_memory:
        return Conv2dStep(backend, x.data, w.data, attrs, y, "cpu")
    why = cudnn_refusal(x, w)
    if why is None:
        return Conv2dStep(backend, x.data, w.data, attrs, y, "cudnn")
    if fused:
        raise ValueError(f"fused=True but the fused CBR path cannot run: {why}")
    if cudnn_after_padding(x.shape, w.shape, x.dtype):     # C=3 of a first layer, K=10 of a classifier
        return padded_forward(backend, x.data, w.data, attrs, y)
    from lazytensor.cbr.cudnn_support import cudnn_fix
    host_or_raise(f"conv2d of x {x.shape} {x.dtype} by w {w.shape}", f"cuDNN cannot take it: {why}", cudnn_fix(x.dtype))
    return Conv2dStep(backend, x.data, w.data, attrs, y, "host", note=f"cuDNN path not taken: {why}")


def build_conv2d(node, backend, cut, out):
    """The conv alone; as the plan's root it writes the destination itself when that is dense (the
    convolutions write dense NHWC) and shares no memory with x or w, else a temporary that a copy
    step moves into place."""
    steps: list = []
    x, w = conv_operands(node, backend, cut, steps)
    # (the conv reads a window around each output: any overlap with its operands needs the temporary)
    dense = (out is not None and out.flags.c_contiguous
             and not any(may_overlap(out, a.data) for a in (x, w)))
    y = out if dense else backend.empty(tuple(node.shape), node.dtype)
    steps.append(_conv_step(backend, x, w, node.attrs, y, False))
    if out is not None and not dense:
        steps.append(copy_step(backend, y, out, "copy into the strided destination"))
    return steps, _tensor.Tensor(y, node.device)


def build_batch_norm(node, backend, cut, out):
    a = node.attrs
    steps: list = []
    x_node = node.args[0]
    gamma, beta = (contiguous(cut(v), backend, steps, cut) for v in node.args[1:3])
    rm, rv = node.args[3], node.args[4]
    channels = node.shape[-1]
    count = math.prod(node.shape[:-1])
    is_conv = isinstance(x_node, Expr) and x_node.op == "conv2d"
    memo = getattr(cut, "memo", None)
    if is_conv and not a.fused and memo is not None and id(x_node) in memo:
        is_conv = False     # the conv already ran for another reader of its output (a gradient rule): read it
    if a.fused and not is_conv:
        raise ValueError("fused=True needs batch_norm applied directly to conv2d(...)")
    # The small per-channel vectors of the plan (eq_scale, eq_bias, saved statistics, staged running
    # statistics, genstats sums) are rows of one allocation: one allocator call, not eight.
    # float64 activations keep float64 statistics and affine maps on the CPU, whose finalize kernel
    # takes any float type (a float64 training step then matches a float64 reference to 1e-10); the
    # CUDA finalize works in float32, as cuDNN's statistics do.
    stat = np.dtype(np.float64) if node.dtype == np.float64 and backend.host_memory else _F32
    rows = iter(backend.empty((8, channels), stat))
    eq = [next(rows), next(rows)]

    if is_conv:
        x, w = conv_operands(x_node, backend, cut, steps)
        y = backend.empty(tuple(x_node.shape), x_node.dtype)
        conv = _conv_step(backend, x, w, x_node.attrs, y, a.fused)
        if memo is not None:    # a later reader of the conv's output (a gradient rule) reads y: one conv
            memo[id(x_node)] = _tensor.Tensor(y, node.device)
    else:
        y = contiguous(cut(x_node), backend, steps, cut).data
        conv = None

    if not a.training:
        if conv is not None:
            steps.append(conv)
        steps.append(FinalizeStep(backend, None, False, count, (gamma.data, beta.data, rm.data, rv.data),
                                  a.momentum, a.eps, eq, training=False))
    else:
        saved = [next(rows), next(rows)]
        if conv is not None and conv.path == "cudnn" and genstats_refusal(x.dtype) is None:
            choice, times = choose_stage1(backend, x, w, x_node.attrs, y)
            a.saved.path = f"stage 1: {choice}" + (f" ({times})" if times else "")
        elif conv is not None and conv.path == "cudnn":     # float32, bfloat16, float64: no genstats engine
            choice = REDUCTION
            a.saved.path = f"stage 1: cuDNN conv + statistics reduction ({genstats_refusal(x.dtype)})"
        else:
            choice = "conv + statistics reduction"
            a.saved.path = f"stage 1: {'im2col + BLAS' if backend.host_memory else conv.path if conv else 'input'}" \
                           f" + statistics reduction"
        if choice == "conv_fprop + genstats":
            sums = [next(rows), next(rows)]
            steps.append(Conv2dStep(backend, x.data, w.data, x_node.attrs, y, "cudnn-genstats", sums,
                                    note=a.saved.path))
            stats, from_sums = sums, True
        else:
            if conv is not None:
                # keep the reason the cuDNN path was not taken (explain must show it)
                conv.note = "; ".join(n for n in (conv.note, a.saved.path) if n)
                steps.append(conv)
            reduction, st = statistics_step(backend, y, node.device, stat)
            steps.append(reduction)
            stats, from_sums = (st[0], st[1]), False
        # The finalize writes the updated running statistics to staging rows; the plan's very last
        # step commits them, so a failure anywhere before leaves running_mean/var untouched.
        staged = [next(rows), next(rows)]
        steps.append(FinalizeStep(backend, stats, from_sums, count, (gamma.data, beta.data, rm.data, rv.data),
                                  a.momentum, a.eps, eq + saved + staged))
        cut.deferred.append(CommitStep(backend, staged, (rm.data, rv.data), (saved[0], saved[1], y)))
        a.saved.saved_mean = _tensor.Tensor(saved[0], node.device)
        a.saved.saved_inv_var = _tensor.Tensor(saved[1], node.device)
        a.saved.conv_out = _tensor.Tensor(y, node.device)
        a.saved.relu_mask = None        # a relu above that writes one sets it (relu_mask_plan)
        a.saved.released = False
        side = getattr(cut, "side", None)
        if side is not None:            # a backward in the same plan reads them (forward_saved nodes)
            side[id(node)] = {"saved_mean": a.saved.saved_mean, "saved_inv_var": a.saved.saved_inv_var}

    scale, bias = (_tensor.Tensor(v, node.device) for v in eq)
    applied = (_tensor.Tensor(y, node.device) * scale + bias).astype(node.dtype)
    return steps, applied


# -- whole-plan patterns -------------------------------------------------------------------------

def _training_bn_below(node):
    """The training batch_norm feeding `node` through elementwise ops only, or None."""
    while isinstance(node, Expr) and node.heavy:
        if node.op == "batch_norm":
            return node if node.attrs.training else None
        if node.op not in OPS and node.op != "astype":   # a reduction, a conv, any heavy op but elementwise
            return None
        nxt = [a for a in node.args if getattr(a, "heavy", False)]
        if len(nxt) != 1:
            return None
        node = nxt[0]
    return None


def relu_mask_plan(root, out, backend, cutter):
    """relu(... batch_norm(...) ...) in training: the final kernel also writes the ReLU mask."""
    if root.op != "relu":
        return None
    bn = _training_bn_below(root.args[0])
    if bn is None:
        return None
    steps: list = []
    cut = cutter(steps, backend)
    final = cut(root)
    program, inputs, scalars = lower(final, out.dtype)
    target = out
    if not out.flags.c_contiguous or aliased(out, inputs):
        target = backend.empty(out.shape, out.dtype)
    mask = backend.empty(((target.size + 7) // 8,), np.dtype(np.uint8))
    steps.append(FusedElementwise(backend, with_relu_mask(program), target, inputs, scalars, mask=mask,
                                  note="BN apply + ReLU + 1-bit ReLU mask in one kernel"))
    if target is not out:
        steps.append(copy_step(backend, target, out, "copy into the destination"))
    bn.attrs.saved.relu_mask = _tensor.Tensor(mask, bn.device)
    for step in cut.deferred:       # the forward's commit step also marks the mask written
        if isinstance(step, CommitStep) and step.written and step.written[-1] is bn.attrs.saved.conv_out.data:
            step.written += (mask,)
    return steps + cut.deferred


def inference_graph_plan(root, out, backend, cutter):
    """relu(batch_norm(conv2d(x, w), training=False)) on CUDA: try the single cuDNN graph."""
    if not backend.cudnn or root.op != "relu":
        return None
    bn = root.args[0]
    if not (isinstance(bn, Expr) and bn.op == "batch_norm" and not bn.attrs.training):
        return None
    conv = bn.args[0]
    from lazytensor.cbr.cudnn_dtypes import graph_refusal
    if not (isinstance(conv, Expr) and conv.op == "conv2d") or out.dtype != conv.dtype:
        return None
    if graph_refusal("conv_scale_bias_relu", out.dtype) is not None:
        return None
    if not out.flags.c_contiguous:
        return None
    steps: list = []
    cut = cutter(steps, backend)
    x, w = conv_operands(conv, backend, cut, steps)
    if cudnn_refusal(x, w) is not None:
        return None
    gamma, beta = (contiguous(cut(v), backend, steps, cut) for v in bn.args[1:3])
    rm, rv = bn.args[3], bn.args[4]
    eq = [backend.empty((bn.shape[-1],), _F32) for _ in range(2)]
    steps.append(FinalizeStep(backend, None, False, 0, (gamma.data, beta.data, rm.data, rv.data),
                              bn.attrs.momentum, bn.attrs.eps, eq, training=False))
    y = backend.empty(tuple(conv.shape), conv.dtype)
    scale, bias = (_tensor.Tensor(v, bn.device) for v in eq)
    epilogue = (_tensor.Tensor(y, bn.device) * scale + bias).astype(bn.dtype)
    program, inputs, scalars = lower(apply("relu", epilogue), out.dtype)
    fallback = [Conv2dStep(backend, x.data, w.data, conv.attrs, y, "cudnn"),
                FusedElementwise(backend, program, out, inputs, scalars, note="BN apply + ReLU epilogue")]
    steps.append(InferenceGraphStep(backend, x.data, w.data, conv.attrs, eq, out, fallback))
    return steps

