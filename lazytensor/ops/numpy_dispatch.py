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
    if method != "__call__" or kwargs or (name is None and ufunc is not np.matmul):
        return NotImplemented
    from lazytensor.core.expr import apply
    from lazytensor.plan.evaluate import assign
    if ufunc is np.matmul:      # ndarray @ tensor, np.matmul(a, b): a heavy node, not an op of the table
        from lazytensor.ops.matmul import matmul
        expr = matmul(*inputs)
    else:
        expr = apply(name, *inputs)
    if out is None:
        return expr
    (dest,) = out
    assign(dest, expr)
    return dest


def _function_table():
    from lazytensor.ops import elementwise as ew, reductions as red, views as vw
    return {np.where: ew.where, np.clip: ew.clip, np.sum: red.sum, np.prod: red.prod, np.mean: red.mean,
            np.max: red.max, np.min: red.min, np.amax: red.max, np.amin: red.min, np.any: red.any,
            np.all: red.all, np.var: red.var, np.std: red.std, np.argmax: red.argmax, np.argmin: red.argmin,
            np.transpose: vw.transpose, np.swapaxes: vw.swapaxes, np.moveaxis: vw.moveaxis,
            np.reshape: vw.reshape, np.ravel: vw.ravel, np.broadcast_to: vw.broadcast_to,
            np.expand_dims: vw.expand_dims, np.squeeze: vw.squeeze}


_functions: dict = {}


def dispatch_function(func, args, kwargs):
    """NumPy functions with a lazy counterpart build nodes (np.where, np.sum, np.transpose, ...);
    any other NumPy function gets NumPy arrays, as through __array__, and computes eagerly."""
    if not _functions:
        _functions.update(_function_table())
    lazy = _functions.get(func)
    if lazy is not None:
        return lazy(*args, **kwargs)
    from lazytensor.core.operand import Operand

    def host(v):
        if isinstance(v, Operand):
            return v.numpy()
        if isinstance(v, (list, tuple)):
            return type(v)(host(u) for u in v)
        return v
    return func(*host(args), **{k: host(v) for k, v in kwargs.items()})
