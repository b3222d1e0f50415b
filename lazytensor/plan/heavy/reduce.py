"""Planning a reduction: one generated kernel that evaluates its operand's elementwise program and
reduces it, into the destination when it is the plan's root, else into a temporary."""
from __future__ import annotations

from lazytensor.core import tensor as _tensor
from lazytensor.plan.evaluated import evaluated_tensor
from lazytensor.plan.lower import lower
from lazytensor.plan.steps import FusedReduction


def build_reduce(node, backend, cut, out):
    x = cut(node.args[0])
    kept = evaluated_tensor(cut, x)
    if kept is not None:                    # evaluated for another step already: read it
        x = kept
    spec = node.attrs
    program, inputs, scalars = lower(x, x.dtype)
    result = out if out is not None else backend.empty(spec.out_shape, spec.out_dtype)
    return [FusedReduction(backend, program, spec, result, inputs, scalars)], _tensor.Tensor(result, node.device)
