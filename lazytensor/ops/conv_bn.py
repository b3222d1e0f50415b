"""conv2d and batch_norm: the heavy nodes of the CBR (Conv + BatchNorm + ReLU) path.

Layouts: activations NHWC (channels last), weights KRSC (K out-channels, R x S window, C
in-channels), per-channel vectors of length K. Each function builds a node like any other op;
the planner (lazytensor.plan.conv.cbr) turns relu(batch_norm(conv2d(...))) into the fused CBR steps,
and still runs each one alone (the unfused path) when it stands alone.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from lazytensor.core.expr import Expr
from lazytensor.core import tensor as _tensor
from lazytensor.cbr.conv_args import validate_conv_args
from lazytensor.kernels.config import UnsupportedOnDevice, config
from lazytensor.core.dtypes import is_float


@dataclass(frozen=True)
class ConvAttrs:
    stride: tuple
    padding: tuple
    dilation: tuple


@dataclass(frozen=True)
class BatchNormAttrs:
    training: bool
    momentum: float
    eps: float
    saved: "BatchNormSaved"
    fused: bool | None          # True: the fused CBR path or an error; None: fused where possible

    @property
    def structure(self) -> tuple:
        """What a plan depends on: all but the holder that receives the results."""
        return (self.training, self.momentum, self.eps, self.fused)


class BatchNormSaved:
    """What a training batch_norm leaves for the backward pass once it has been evaluated:
    saved_mean and saved_inv_var (float32, per channel), conv_out (the batch_norm's input: the conv
    output on the CBR path, which the fused backward reads), and, when a relu consumes the
    batch_norm, relu_mask: the bits (y > 0), 8 per uint8 byte, lowest bit first (np.packbits
    with bitorder="little" over y flattened). `path` says which stage-1 path computed the
    statistics, with the measured times when they were compared.

    Planning the forward (lt.explain) already puts arrays here; `forward_results` tells arrays a
    completed forward wrote from those (lazytensor.plan.conv.saved_results) and raises otherwise."""

    def __init__(self):
        self.saved_mean = None
        self.saved_inv_var = None
        self.conv_out = None
        self.relu_mask = None
        self.path = None
        self.released = False

    def __repr__(self):
        got = [n for n in _SAVED if getattr(self, n) is not None]
        return f"BatchNormSaved({', '.join(got) or 'not evaluated yet'}; path={self.path!r})"

    def release(self) -> None:
        """Drop the saved arrays (their memory goes back to the pool, or to the CUDA graph that wrote
        them, which hands them out again with its next forward); a backward built later raises."""
        for n in _SAVED:
            setattr(self, n, None)
        self.released = True

    def forward_results(self, need_mask: bool, what: str) -> dict:
        """{name: Tensor} of the completed forward's saved arrays, or a clear error saying why not."""
        from lazytensor.plan.conv.saved_results import written
        names = [n for n in _SAVED if n != "relu_mask" or need_mask]
        missing = [n for n in names if getattr(self, n) is None]
        if missing:
            if self.released and all(getattr(self, n) is None for n in _SAVED):
                raise ValueError(f"{what}: the forward's saved results were released (BatchNormSaved.release()); "
                                 "evaluate the training forward again before building its backward")
            if missing == ["relu_mask"]:
                raise ValueError(f"{what}: the forward saved no ReLU mask: evaluate relu(batch_norm(...)) itself "
                                 "in training, so that its last kernel writes the mask")
            raise ValueError(f"{what}: the training forward was never evaluated (no {', '.join(missing)}); "
                             "evaluate it (lt.evaluate or an assignment) before building its backward")
        found = {n: getattr(self, n) for n in names}
        stale = [n for n, t in found.items() if not written(t.data)]
        if stale:
            raise ValueError(f"{what}: the saved {', '.join(stale)} belong to a forward that was planned (lt.explain, "
                             "or an evaluation that failed) but never ran to its end; evaluate the training forward, "
                             "then build its backward")
        return found

    # Identity hashing: a holder is part of a node's attributes, never of a kernel's structure.
    __hash__ = object.__hash__


_SAVED = ("saved_mean", "saved_inv_var", "conv_out", "relu_mask")


def _tensor_operand(x, name: str, device=None):
    if isinstance(x, (_tensor.Tensor, Expr)):
        return x
    if isinstance(x, np.ndarray):
        return _tensor.asarray(x, device=device or "cpu")
    raise TypeError(f"{name} must be a Tensor or an expression, got {type(x).__name__}")


def _checked_conv(*args):
    """validate_conv_args, remembered per call signature: a training loop checks its shapes once."""
    try:
        return _checked_conv_cached(*args)
    except TypeError as e:
        if "unhashable" not in str(e):
            raise
        return validate_conv_args(*args)          # a list for stride or padding


@functools.lru_cache(maxsize=1024)
def _checked_conv_cached(*args):
    return validate_conv_args(*args)


def device_refusal(what, x, w_shape=None):
    """On CUDA, where no cuDNN graph can take a conv of x's dtype (or no cuDNN is there at all): the
    error at the line building the node, unless lt.config.allow_host (the planner then warns once
    and runs it on the host). What only a graph build can tell (a shape cuDNN rejects) is raised
    when the plan first runs."""
    if x.device != "cuda" or config.allow_host:
        return
    from lazytensor.cbr.cudnn_support import cudnn_dtype_refusal, cudnn_fix, cudnn_unavailable_reason
    why = cudnn_dtype_refusal(x.dtype) or cudnn_unavailable_reason()
    if why is not None:
        shapes = f" of x {tuple(x.shape)} {x.dtype}" + (f" by w {tuple(w_shape)}" if w_shape is not None else "")
        raise UnsupportedOnDevice(f"{what}{shapes}", f"cuDNN cannot take it: {why}", cudnn_fix(x.dtype))


def conv2d(x, w, bias=None, stride=1, padding=0, dilation=1):
    """2-D convolution (cross-correlation, as in PyTorch) of NHWC x with KRSC weights w.

    y[n, p, q, k] = sum over r, s, c of x[n, p*sh + r*dh - ph, q*sw + s*dw - pw, c] * w[k, r, s, c]
    (+ bias[k]). stride, padding, dilation: an int or an (h, w) pair. Returns (N, P, Q, K).
    """
    x = _tensor_operand(x, "x")
    w = _tensor_operand(w, "w", x.device)
    checked = _checked_conv(x.shape, w.shape, x.dtype, w.dtype, stride, padding, dilation)
    if w.device != x.device:
        raise ValueError(f"conv2d: x is on {x.device!r} but w is on {w.device!r}")
    device_refusal("conv2d", x, w.shape)
    node = Expr("conv2d", (x, w), checked.out_shape, x.dtype, x.device, heavy=True,
                attrs=ConvAttrs(checked.stride, checked.padding, checked.dilation))
    if bias is not None:
        bias = _tensor_operand(bias, "bias", x.device)
        if tuple(bias.shape) != (checked.out_shape[3],):
            raise ValueError(f"conv2d: bias must have shape ({checked.out_shape[3]},), one value per "
                             f"out-channel; got {tuple(bias.shape)}")
        node = (node + bias).astype(x.dtype)
    return node


def batch_norm(x, gamma, beta, running_mean, running_var, training=True, momentum=0.1, eps=1e-5,
               saved: BatchNormSaved | None = None, fused: bool | None = None):
    """Batch normalisation over the channel (last) axis of x.

    training=True: normalise by the batch statistics (biased variance), and update the running
    statistics in place, cuDNN style: running = (1 - momentum) * running + momentum * batch, where
    running_var takes the unbiased batch variance n/(n-1), as PyTorch does. training=False: normalise
    by the running statistics. gamma, beta, running_mean, running_var: float32 Tensors of shape (C,).
    saved: a BatchNormSaved that receives the saved statistics (and the ReLU mask) for backward.
    fused=True: raise, saying what to change, when the fused CBR path cannot be taken.
    """
    x = _tensor_operand(x, "x")
    if len(x.shape) < 2:
        raise ValueError(f"batch_norm expects x with a channel axis last, e.g. NHWC; got shape {tuple(x.shape)}")
    channels = x.shape[-1]
    if not is_float(x.dtype):
        raise TypeError(f"batch_norm takes floating-point x; got {x.dtype.name}")
    vectors = []
    for name, v in (("gamma", gamma), ("beta", beta), ("running_mean", running_mean), ("running_var", running_var)):
        if name.startswith("running") and not isinstance(v, _tensor.Tensor):
            raise TypeError(f"batch_norm: {name} must be a Tensor (it is updated in place), got {type(v).__name__}")
        v = _tensor_operand(v, name, x.device)
        if tuple(v.shape) != (channels,):
            raise ValueError(f"batch_norm: {name} must have shape ({channels},), one value per channel of x "
                             f"(x has shape {tuple(x.shape)}); got {tuple(v.shape)}")
        if v.dtype != np.float32:
            raise TypeError(f"batch_norm: {name} must be float32; got {v.dtype.name}")
        if v.device != x.device:
            raise ValueError(f"batch_norm: x is on {x.device!r} but {name} is on {v.device!r}")
        vectors.append(v)
    if fused and not (isinstance(x, Expr) and x.op == "conv2d"):
        raise ValueError("batch_norm(fused=True) needs x to be conv2d(...) itself, so that conv, batch_norm "
                         "(and relu) run as one CBR step; pass fused=None to allow the unfused path")
    if not 0.0 <= float(momentum) <= 1.0:
        raise ValueError(f"batch_norm: momentum is the weight of the new batch statistics, in [0, 1]; got {momentum}")
    if not float(eps) >= 0.0:
        raise ValueError(f"batch_norm: eps must be >= 0 (it is added to the variance); got {eps}")
    count = math.prod(x.shape[:-1])
    if training and count < 2:
        raise ValueError(f"batch_norm in training needs more than one value per channel; x has shape {tuple(x.shape)}")
    attrs = BatchNormAttrs(bool(training), float(momentum), float(eps), saved or BatchNormSaved(), fused)
    return Expr("batch_norm", (x, *vectors), tuple(x.shape), x.dtype, x.device, heavy=True, attrs=attrs)

