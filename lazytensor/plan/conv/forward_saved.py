"""Planning forward_saved nodes (lazytensor.ops.forward_saved): a backward reading what its forward, in
the same plan, wrote beside its value.

Design: docs/design/plans.md, section "lazytensor/plan/conv/forward_saved.py".
"""
from __future__ import annotations

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import apply
from lazytensor.kernels.program import with_relu_mask
from lazytensor.plan.evaluated import evaluating_step, materialized
from lazytensor.plan.steps import FusedElementwise

_U8 = np.dtype(np.uint8)


def build_forward_saved(node, backend, cut, out):
    source, part = node.args[0], node.attrs
    side = getattr(cut, "side", None)
    if side is None:
        raise ValueError("forward_saved: planned without the plan's cutter, which records the forward's saved results")
    if source.result is not None:   # the forward ran in an earlier plan: read what it left
        if part == "relu_mask":
            return _relu_mask(source.result, backend, cut, side)
        return [], source.attrs.saved.forward_results(False, "forward_saved")[part]
    if part == "relu_mask":
        return _relu_mask(source, backend, cut, side)
    cut(source)                     # the forward batch_norm: planned once, it records its saved rows
    found = side.get(id(source))
    if found is None:
        raise ValueError(f"forward_saved: the batch_norm's plan saved no {part} (not a training batch_norm "
                         f"of this plan)")
    return [], found[part]


def _relu_mask(relu, backend, cut, side):
    found = side.get(id(relu))
    if found is not None:
        return [], found["relu_mask"]
    steps: list = []
    value = cut(relu)
    step = evaluating_step(cut, value)     # (a Tensor where the cutter evaluated the relu once: its writer)
    if step is None and not isinstance(value, _tensor.Tensor):
        materialized(value, backend, steps, cut)    # not evaluated yet: here, with its mask; later readers read it
        step = evaluating_step(cut, value)
    elif step is None or not _can_take_mask(step):
        # evaluated by a step that cannot take the mask: relu of that value once more, for the mask
        again = apply("relu", value) if isinstance(value, _tensor.Tensor) else value
        steps = cut.plan(again, backend.empty(tuple(value.shape), value.dtype), backend)
        step = steps[-1]
    mask = backend.empty(((step.out.size + 7) // 8,), _U8)
    step.program = with_relu_mask(step.program)
    step.mask = mask                # (planned, not run yet: its launch is bound on its first run)
    step.note = "; ".join(filter(None, [step.note, "BN apply + ReLU + the 1-bit ReLU mask the backward of this "
                                                  "plan reads"]))
    result = _tensor.Tensor(mask, relu.device)
    side[id(relu)] = {"relu_mask": result}
    return steps, result


def _can_take_mask(step) -> bool:
    """A step that wrote the relu alone, dense, with no mask yet: one more output for its kernel."""
    return (type(step) is FusedElementwise and step.mask is None and step.out.flags.c_contiguous
            and step.program.instrs[-1][0] == "relu")

