"""Gradients of scans (node op "scan", attrs a kernels.scan.Scan): cumsum's is the output gradient
summed from each position to the end of the axis, a reversed cumsum (flip, cumsum, flip: the flips
are views, so it is one scan kernel). cumprod has no rule yet: lt.grad says so."""
from __future__ import annotations

from lazytensor.autodiff.rules import differentiable, gradient_rule
from lazytensor.ops.scans import cumsum
from lazytensor.ops.views import getitem


@gradient_rule("scan")
def _scan(node, g):
    spec = node.attrs
    (x,) = node.args
    if not differentiable(x.dtype) or not differentiable(spec.out_dtype):
        return (None,)
    if spec.kind != "cumsum":
        raise NotImplementedError("lt.grad has no gradient rule for cumprod yet; write it with lt.exp(lt.cumsum(lt.log(x))) "
                                  "for positive x, or compute the gradient by hand")
    reverse = (slice(None),) * spec.axis + (slice(None, None, -1),)
    return (getitem(cumsum(getitem(g, reverse), axis=spec.axis), reverse),)
