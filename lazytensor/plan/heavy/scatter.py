"""The planner of "scatter" nodes: zeros of a shape with an expression written into a basic-index
view of them. The reverse pass (lazytensor.autodiff) builds one for the gradient of an indexing
view that does not cover its base (`x[::2]`, `x[3]`): the gradient is zero where the view does not
look. Two kernels: one fills the result with zeros, one evaluates the expression (fused with
whatever elementwise work computes it) into the view of the result.
"""
from __future__ import annotations

from lazytensor.core.expr import Const
from lazytensor.core.memory import may_overlap
from lazytensor.core.tensor import Tensor
from lazytensor.core.view_steps import apply_step


def build_scatter(node, backend, cut, out):
    part = cut(node.args[0])
    key = node.attrs
    if out is None or any(may_overlap(leaf.data, out) for leaf in part.leaves):
        out = backend.empty(tuple(node.shape), node.dtype)     # zeroing `out` first would change what `part` reads
    steps = cut.plan(Const(0.0, node.dtype), out, backend)
    steps[-1].note = "zeros: the gradient of an indexing view is zero where the view does not look"
    written = cut.plan(part, apply_step(out, ("index", key)), backend)
    written[-1].note = "the gradient of the view, written where the view looks"
    return steps + written, Tensor(out, node.device)

