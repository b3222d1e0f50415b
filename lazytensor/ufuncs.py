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


def _function_table():
    import lazytensor as lt
    return {np.where: lt.where, np.clip: lt.clip, np.sum: lt.sum, np.prod: lt.prod, np.mean: lt.mean,
            np.max: lt.max, np.min: lt.min, np.amax: lt.max, np.amin: lt.min, np.any: lt.any, np.all: lt.all,
            np.var: lt.var, np.std: lt.std, np.argmax: lt.argmax, np.argmin: lt.argmin,
            np.transpose: lt.transpose, np.swapaxes: lt.swapaxes, np.moveaxis: lt.moveaxis,
            np.reshape: lt.reshape, np.ravel: lt.ravel, np.broadcast_to: lt.broadcast_to,
            np.expand_dims: lt.expand_dims, np.squeeze: lt.squeeze}


_functions: dict = {}


def dispatch_function(func, args, kwargs):
    """NumPy functions with a lazy counterpart build nodes (np.where, np.sum, np.transpose, ...);
    any other NumPy function gets NumPy arrays, as through __array__, and computes eagerly."""
    if not _functions:
        _functions.update(_function_table())
    lazy = _functions.get(func)
    if lazy is not None:
        return lazy(*args, **kwargs)
    from lazytensor.operand import Operand

    def host(v):
        if isinstance(v, Operand):
            return v.numpy()
        if isinstance(v, (list, tuple)):
            return type(v)(host(u) for u in v)
        return v
    return func(*host(args), **{k: host(v) for k, v in kwargs.items()})
