"""Gradients of a lazy concatenate (node op "concatenate", attrs the axis): each part's gradient is
its slice of the output gradient, a view (no copy, no kernel of its own)."""
from __future__ import annotations

from lazytensor.autodiff.rules import differentiable, gradient_rule
from lazytensor.ops.views import getitem


@gradient_rule("concatenate")
def _concatenate(node, g):
    axis = node.attrs
    grads = []
    start = 0
    for part in node.args:
        stop = start + part.shape[axis]
        flows = differentiable(part.dtype) and differentiable(node.dtype)
        grads.append(getitem(g, (slice(None),) * axis + (slice(start, stop),)) if flows else None)
        start = stop
    return tuple(grads)
