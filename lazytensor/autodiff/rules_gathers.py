"""Gradients of lazy gathers: `x[mask]` (node op "mask_gather", args (x, mask)) sends its output
gradient back to the places the mask selected, zeros elsewhere: a "mask_expand" node (planned in
lazytensor.plan.heavy.mask_gather: zeros, then the gradient written through the mask)."""
from __future__ import annotations

from lazytensor.autodiff.rules import differentiable, gradient_rule
from lazytensor.core.expr import Expr


@gradient_rule("mask_gather")
def _mask_gather(node, g):
    x, mask = node.args
    if not differentiable(x.dtype):
        return (None, None)
    g = g.astype(x.dtype)
    return (Expr("mask_expand", (g, mask), tuple(x.shape), x.dtype, x.device, heavy=True), None)


@gradient_rule("row_gather")
def _row_gather(node, g):
    """`x[idx]` along the first axis: the output gradient added into zeros at the indexed rows, a
    repeated row receiving the sum of its gradients."""
    x, index = node.args
    if not differentiable(x.dtype):
        return (None, None)
    g = g.astype(x.dtype)
    return (Expr("row_scatter_add", (g, index), tuple(x.shape), x.dtype, x.device, heavy=True), None)
