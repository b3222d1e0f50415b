"""Gradients of reductions (node op "reduce", attrs a kernels.program.Reduction spec).

Design: docs/design/autodiff.md, section "lazytensor/autodiff/rules_reductions.py".
"""
from __future__ import annotations

import math

from lazytensor.autodiff.rules import differentiable, gradient_rule
from lazytensor.ops.elementwise import isnan, where
from lazytensor.ops.reductions import reduce
from lazytensor.ops.views import broadcast_to, reshape


@gradient_rule("reduce")
def _reduce(node, g):
    spec = node.attrs
    (x,) = node.args
    if not differentiable(x.dtype):
        return (None,)
    axes = spec.axes
    kept = tuple(1 if i in axes else d for i, d in enumerate(spec.in_shape))
    gk = reshape(g, kept)
    kind = spec.kind
    if kind == "sum":
        dx = broadcast_to(gk, spec.in_shape)
    elif kind == "mean":
        dx = broadcast_to(gk / spec.count, spec.in_shape)
    elif kind == "prod":
        zero = x == 0
        zeros = reduce("sum", zero, axis=axes, keepdims=True)
        others = reduce("prod", where(zero, 1, x), axis=axes, keepdims=True)
        dx = gk * where(zeros == 0, others / x, where(zero & (zeros == 1), others, 0.0))
    elif kind in ("max", "min"):
        picked = (x == reshape(node, kept)) | isnan(x)
        ties = reduce("sum", picked, axis=axes, keepdims=True, dtype=x.dtype)
        dx = where(picked, gk / ties, 0.0)
    elif kind == "var":
        centered = x - reduce("mean", x, axis=axes, keepdims=True)
        dof = spec.count - spec.ddof
        if spec.root:
            dx = gk * centered / (reshape(node, kept) * dof)
        else:
            dx = gk * centered * (2.0 / dof if dof else math.inf)
    else:
        raise NotImplementedError(f"lt.grad has no gradient rule for the reduction {kind!r}")
    return (dx,)
