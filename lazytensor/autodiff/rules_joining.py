"""Gradients of a lazy concatenate (node op "concatenate", attrs the axis): each part's gradient is
its slice of the output gradient, a view (no copy, no kernel of its own)."""
from __future__ import annotations

from lazytensor.autodiff.rules import gradient_rule
from lazytensor.ops.views import getitem
from lazytensor.core.dtypes import is_float


@gradient_rule("concatenate")
def _concatenate(node, g):
    axis = node.attrs
    grads = []
    start = 0
    for part in node.args:
        stop = start + part.shape[axis]
        flows = is_float(part.dtype) and is_float(node.dtype)
        grads.append(getitem(g, (slice(None),) * axis + (slice(start, stop),)) if flows else None)
        start = stop
    return tuple(grads)
