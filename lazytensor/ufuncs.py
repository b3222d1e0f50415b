"""NumPy's ufunc protocol: np.exp(t), np.add(a, b, out=y) build the same lazy nodes."""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.ops import OPS

_NAMES = {ufunc: name for name, ufunc in ((n, getattr(np, n, None)) for n in OPS) if isinstance(ufunc, np.ufunc)}
_NAMES[np.divide] = "true_divide"
_NAMES[np.abs] = "absolute"
_NAMES[np.mod] = "remainder"


def dispatch_ufunc(ufunc, method, inputs, out, kwargs):
    name = _NAMES.get(ufunc)
    if method != "__call__" or name is None or kwargs:
        return NotImplemented
    from lazytensor.expr import apply
    from lazytensor.evaluate import assign
    expr = apply(name, *inputs)
    if out is None:
        return expr
    (dest,) = out
    assign(dest, expr)
    return dest
