"""NumPy's ufunc protocol: np.exp(t), np.add(a, b, out=y) build the same lazy nodes."""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.ops import OPS

_NAMES = {ufunc: name for name, ufunc in ((n, getattr(np, n, None)) for n in OPS) if isinstance(ufunc, np.ufunc)}
_NAMES[np.divide] = "true_divide"
_NAMES[np.abs] = "absolute"
_NAMES[np.mod] = "remainder"
for _alias, _op in (("bitwise_not", "invert"), ("bitwise_left_shift", "left_shift"),
                    ("bitwise_right_shift", "right_shift"), ("acos", "arccos"), ("asin", "arcsin"),
                    ("atan", "arctan"), ("atan2", "arctan2"), ("acosh", "arccosh"), ("asinh", "arcsinh"),
                    ("atanh", "arctanh")):
    if _op is not None and isinstance(getattr(np, _alias, None), np.ufunc):
        _NAMES[getattr(np, _alias)] = _op


def _matmul(inputs, out):
    from lazytensor.ops.matmul import matmul
    from lazytensor.assign.evaluate import assign
    expr = matmul(*inputs)
    if out is None:
        return expr
    (dest,) = out
    assign(dest, expr)
    return dest


def dispatch_ufunc(ufunc, method, inputs, out, kwargs):
    """np.exp(t), np.add(a, b, out=y, casting=..., dtype=..., where=mask): the same lazy nodes as
    the operators. A ufunc lazytensor lacks raises a TypeError that names it, where NumPy would say
    "operand type(s) all returned NotImplemented"."""
    name = _NAMES.get(ufunc)
    if ufunc is np.matmul and method == "__call__" and not kwargs:
        return _matmul(inputs, out)     # ndarray @ tensor, np.matmul(a, b): a heavy node, not an op of the table
    if name is None:
        raise TypeError(f"lazytensor has no lazy counterpart of np.{ufunc.__name__}; to compute it eagerly "
                        f"with NumPy on purpose, pass host arrays: np.{ufunc.__name__}(np.asarray(t), ...)")
    if method != "__call__":
        return _ufunc_method(ufunc, method, inputs, out, kwargs)
    from lazytensor.core.expr import apply, astype
    from lazytensor.assign.evaluate import assign
    casting = kwargs.pop("casting", "same_kind")
    dtype = kwargs.pop("dtype", None)
    where = kwargs.pop("where", True)
    signature = kwargs.pop("signature", None)
    for key, default in (("order", "K"), ("subok", True)):
        if kwargs.get(key, default) == default:
            kwargs.pop(key, None)
    if kwargs:
        raise TypeError(f"np.{ufunc.__name__} on lazytensor tensors does not take {', '.join(sorted(kwargs))}=; "
                        f"it takes out=, dtype=, casting= and, with out=, where=")
    if signature is not None:
        if dtype is not None:
            raise TypeError("cannot specify both 'signature' and 'dtype'")
        dtype = signature if isinstance(signature, (str, np.dtype, type)) else signature[-1]
    if dtype is not None or casting in ("no", "equiv", "safe"):
        inputs = _cast_inputs(ufunc, inputs, dtype, casting)
    expr = apply(name, *inputs)
    if dtype is not None and expr.dtype != np.dtype(dtype):
        expr = astype(expr, dtype)
    if out is None:
        if where is not True:
            raise TypeError(f"np.{ufunc.__name__}(..., where=mask) without out= leaves the masked-out elements "
                            f"undefined; pass out=y, or write lt.where(mask, np.{ufunc.__name__}(...), fill)")
        return expr
    if len(out) != 1:
        raise TypeError(f"np.{ufunc.__name__} has one output; got out= with {len(out)}")
    (dest,) = out
    if isinstance(dest, np.ndarray):
        raise TypeError(f"np.{ufunc.__name__}(..., out=) into a NumPy array: lazytensor writes tensors; "
                        f"wrap it first with y = lt.asarray(array), which shares its memory on the CPU")
    if not np.can_cast(expr.dtype, dest.dtype, casting=casting):
        raise TypeError(f"Cannot cast ufunc '{ufunc.__name__}' output from {expr.dtype!r} to {dest.dtype!r} "
                        f"with casting rule '{casting}'")
    if expr.dtype != dest.dtype:
        expr = astype(expr, dest.dtype)       # allowed by `casting` (same_kind or looser)
    if where is not True:
        from lazytensor.ops.elementwise import where as lazy_where
        expr = lazy_where(where, expr, dest)
    assign(dest, expr)
    return dest


def _cast_inputs(ufunc, inputs, dtype, casting):
    """The loop NumPy picks for `dtype=` (the output's dtype) under `casting`, with its errors; the
    inputs cast to it."""
    from lazytensor.core import dtypes as _dt
    from lazytensor.core.expr import astype
    from lazytensor.core.operand import Operand
    types = tuple(x.dtype if isinstance(x, Operand) else _dt.operand_type(x) for x in inputs)
    fixed = {} if dtype is None else {"signature": (None,) * ufunc.nin + (np.dtype(dtype),)}
    loop = ufunc.resolve_dtypes((*types, None), casting=casting, **fixed)
    return tuple(astype(x, want) if isinstance(x, Operand) and x.dtype != want else x
                 for x, want in zip(inputs, loop[:ufunc.nin]))


# np.add.reduce(t, axis=0) and friends: the reductions lazytensor has.
_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
           "logical_and": "all", "logical_or": "any"}


def _ufunc_method(ufunc, method, inputs, out, kwargs):
    name = _NAMES[ufunc]
    if method == "reduce" and name in _REDUCE and out is None and len(inputs) == 1:
        from lazytensor.ops import reductions
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        dtype = kwargs.pop("dtype", None)
        if not kwargs:
            args = {"dtype": dtype} if dtype is not None else {}
            return getattr(reductions, _REDUCE[name])(inputs[0], axis=axis, keepdims=keepdims, **args)
    raise TypeError(f"np.{ufunc.__name__}.{method} has no lazy counterpart in lazytensor (lazy: the reduce of "
                    f"{', '.join(f'np.{u}' for u in _REDUCE)} without out=); to compute it eagerly with NumPy on "
                    f"purpose, pass host arrays: np.{ufunc.__name__}.{method}(np.asarray(t), ...)")


def _function_table():
    from lazytensor.ops import (elementwise as ew, indexing as ix, joining as jn, reductions as red, scans as sc,
                                sorting as so, ufuncs as uf, views as vw)
    return {np.where: ew.where, np.clip: ew.clip, np.sum: red.sum, np.prod: red.prod, np.mean: red.mean,
            np.max: red.max, np.min: red.min, np.amax: red.max, np.amin: red.min, np.any: red.any,
            np.all: red.all, np.var: red.var, np.std: red.std, np.argmax: red.argmax, np.argmin: red.argmin,
            np.transpose: vw.transpose, np.swapaxes: vw.swapaxes, np.moveaxis: vw.moveaxis,
            np.reshape: vw.reshape, np.ravel: vw.ravel, np.broadcast_to: vw.broadcast_to,
            np.expand_dims: vw.expand_dims, np.squeeze: vw.squeeze,
            np.round: uf.round, np.around: uf.round, np.flip: vw.flip, np.concatenate: jn.concatenate,
            np.stack: jn.stack, np.hstack: jn.hstack, np.vstack: jn.vstack, np.sort: so.sort,
            np.argsort: so.argsort, np.roll: jn.roll, np.repeat: jn.repeat, np.tile: jn.tile,
            np.nonzero: ix.nonzero, np.take: ix.take, np.take_along_axis: ix.take_along_axis,
            np.cumsum: sc.cumsum, np.cumprod: sc.cumprod,
            **{getattr(np, n): getattr(sc, n) for n in ("cumulative_sum", "cumulative_prod") if hasattr(np, n)},
            **_creation_functions(), **_array_api_functions(), **_numpy_functions()}


def _numpy_functions():
    """NumPy's functions composed from the nodes above (nan-reductions, statistics, products, ...)."""
    from lazytensor.ops import (closeness, counting, diagonals, dots, einsum, like, nan_reductions, padding,
                                quantiles, splitting, statistics, complex_parts)
    modules = (nan_reductions, quantiles, statistics, closeness, like, splitting, diagonals, padding, dots,
               einsum, counting, complex_parts)
    names = ("nansum", "nanprod", "nancumsum", "nancumprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin",
             "median", "nanmedian", "quantile", "nanquantile", "percentile", "nanpercentile", "average", "ptp",
             "isclose", "allclose", "array_equal", "zeros_like", "ones_like", "empty_like", "full_like", "copy",
             "atleast_1d", "atleast_2d", "atleast_3d", "split", "array_split", "diagonal", "trace", "diag", "pad",
             "dot", "inner", "outer", "einsum", "unique", "bincount", "argwhere", "histogram", "isin",
             "real", "imag", "angle")
    return {getattr(np, n): getattr(next(m for m in modules if hasattr(m, n)), n) for n in names}


def _creation_functions():
    """np.array(..., like=t), np.arange(..., like=t): NumPy's creation functions given a tensor
    make tensors on its device (how Dask makes chunks like its meta)."""
    from lazytensor.core import tensor

    def arange(start, stop=None, step=None, dtype=None, *, like=None, device=None):
        device = getattr(like, "device", None) if device is None else device
        return tensor.arange(start, stop, 1 if step is None else step, dtype=dtype, device=device)

    def array(a, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
        _numpy_defaults(order=(order, "K"), subok=(subok, False), ndmin=(ndmin, 0))
        return asarray(a, dtype, copy=copy, like=like)

    def asarray(a, dtype=None, order=None, *, device=None, copy=None, like=None):
        _numpy_defaults(order=(order, None))
        device = getattr(like, "device", None) if device is None else device
        if isinstance(a, tensor.Operand):
            t = tensor.asarray(a, dtype=dtype, device=device)
            return t.copy() if copy and t is a else t
        return tensor.asarray(np.array(a, dtype=dtype, copy=copy), device=device)

    return {np.array: array, np.asarray: asarray, np.arange: arange}     # (np.zeros_like and friends: _numpy_functions)


def _numpy_defaults(**given) -> None:
    for name, (value, default) in given.items():
        if value != default:
            raise TypeError(f"lazytensor's creation functions take no {name}={value!r}")


def _array_api_functions():
    """The Array API's functions that NumPy also has."""
    from lazytensor.ops import broadcasting, differences, products, searching, sets, triangles
    modules = (broadcasting, differences, products, searching, sets, triangles)
    names = ("matrix_transpose", "tensordot", "vecdot", "count_nonzero", "searchsorted", "unique_all",
             "unique_counts", "unique_inverse", "unique_values", "diff", "broadcast_arrays", "meshgrid",
             "unstack", "tril", "triu")
    return {getattr(np, n): getattr(next(m for m in modules if hasattr(m, n)), n) for n in names if hasattr(np, n)}


_functions: dict = {}


def dispatch_function(func, args, kwargs):
    """NumPy functions with a lazy counterpart build nodes (np.where, np.sum, np.transpose, ...).
    Any other NumPy function raises a TypeError naming it, as CuPy does: silently computing it on
    host copies would take the user's code out of lazytensor (on CUDA, through a device-to-host
    copy) without notice."""
    if not _functions:
        _functions.update(_function_table())
        _functions.update(_linalg_functions())
        _functions.update(_fft_functions())
    lazy = _functions.get(func)
    if lazy is not None:
        return lazy(*args, **kwargs)
    name = f"{func.__module__.replace('numpy._core.', 'numpy.').replace('numpy', 'np', 1)}.{func.__name__}"
    raise TypeError(f"{name} has no lazy counterpart in lazytensor; to compute it eagerly with NumPy on "
                    f"purpose, pass host arrays: {name}(np.asarray(t), ...) (a device-to-host copy on CUDA)")


def _linalg_functions():
    """np.linalg's functions that lt.linalg has, under the same names and signatures."""
    from lazytensor.ops import linalg
    return {getattr(np.linalg, n): getattr(linalg, n) for n in linalg.__all__
            if n[0].islower() and hasattr(np.linalg, n)}


def _fft_functions():
    """np.fft's functions, lt.fft's under the same names and signatures."""
    from lazytensor.ops import fft
    names = fft.__all__ + ["fft2", "ifft2", "rfft2", "irfft2"]
    return {getattr(np.fft, n): getattr(fft, n) for n in names if hasattr(np.fft, n)}
