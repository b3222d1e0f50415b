"""Nodes that stand for what a forward step writes beside its value, for a backward planned with it.

Design: docs/design/plans.md, section "lazytensor/ops/forward_saved.py".
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
