"""Planning a view that strides cannot express (a reshape of a transposed array, say): its operand
evaluated into a temporary, then viewed; an operand that already ran into a temporary of its own is
viewed without a copy."""
from __future__ import annotations

from lazytensor.core import tensor as _tensor
from lazytensor.core.view_steps import NoViewPossible, apply_step
from lazytensor.plan.evaluated import evaluated_tensor, keep_evaluated


def build_materialize(node, backend, cut, out):
    x = cut(node.args[0])
    step, why = node.attrs
    kept = evaluated_tensor(cut, x)
    if node.args[0].heavy and isinstance(kept, _tensor.Tensor):
        try:    # the heavy operand already ran into a temporary of its own: view it, no copy
            return [], _tensor.Tensor(apply_step(kept.data, step), node.device)
        except NoViewPossible:
            pass
    tmp = backend.empty(x.shape, x.dtype)
    steps = cut.plan(x, tmp, backend)
    steps[-1].note = f"materialized into a temporary for a view: {why}"
    keep_evaluated(cut, x, tmp, steps[-1])
    return steps, _tensor.Tensor(apply_step(tmp, step), node.device)
