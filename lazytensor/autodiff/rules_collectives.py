"""Gradient of an all-reduce (node op "all_reduce"): y = sum over ranks of x_r, so each rank's x
receives the sum over ranks of the output gradient (the mean's, divided by the world size: the
all-reduce with op "mean" again). max, min and prod have no rule: lt.grad says so."""
from __future__ import annotations

from lazytensor.autodiff.rules import gradient_rule
from lazytensor.ops.collectives import all_reduced
from lazytensor.core.dtypes import is_float


@gradient_rule("all_reduce")
def _all_reduce(node, g):
    spec = node.attrs
    if not is_float(node.dtype):
        return (None,)
    if spec.op not in ("sum", "mean"):
        raise NotImplementedError(f"lt.grad has no gradient rule for all_reduce(op={spec.op!r}); only sum and mean")
    return (all_reduced(g, spec.op, f"gradient of {spec.label or 'an all_reduce'}"),)
