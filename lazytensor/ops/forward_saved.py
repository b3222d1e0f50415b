"""Nodes that stand for what a forward step writes beside its value, for a backward planned with it.

    forward_saved(bn, "saved_mean")      (K,) float32: the batch mean a training batch_norm computed
    forward_saved(bn, "saved_inv_var")   (K,) float32: its 1 / sqrt(var + eps)
    forward_saved(root, "relu_mask")     the 1-bit ReLU mask of root = relu(... batch_norm ...), 8 per
                                         uint8 byte, lowest bit first, over root's NHWC-flattened elements

A backward built before its forward ran (one assignment of forward, lt.grad and the update: a
recorded training step) reads the forward's saved results through these nodes instead of a
BatchNormSaved holder's arrays. Their operand is the forward node itself, so the DAG orders the
forward's steps before the backward's and the plan keeps the saved arrays from the forward step
that writes them to the last backward step that reads them (lazytensor.plan.conv.forward_saved).
The conv output needs no such node: it is the conv2d node's own value.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.expr import Expr

_PARTS = ("saved_mean", "saved_inv_var", "relu_mask")


def forward_saved(source: Expr, part: str) -> Expr:
    """The node standing for `part` of `source`'s forward step (see the module doc)."""
    if part not in _PARTS:
        raise ValueError(f"forward_saved: part must be one of {', '.join(_PARTS)}; got {part!r}")
    if not isinstance(source, Expr):
        raise TypeError(f"forward_saved: the source must be an unevaluated forward expression; got "
                        f"{type(source).__name__}")
    if part == "relu_mask":
        if source.op != "relu":
            raise ValueError(f"forward_saved: a ReLU mask comes from a relu node; got {source.op!r}")
        size = 1
        for d in source.shape:
            size *= d
        shape, dtype = ((size + 7) // 8,), np.dtype(np.uint8)
    else:
        if source.op != "batch_norm" or not source.attrs.training:
            raise ValueError(f"forward_saved: {part} comes from a batch_norm in training; got {source.op!r}")
        shape, dtype = (source.shape[-1],), np.dtype(np.float32)
    return Expr("forward_saved", (source,), shape, dtype, source.device, heavy=True, attrs=part)
