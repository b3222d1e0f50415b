"""Reductions: sum mean prod max min any all var std argmax argmin, as NumPy spells them.

A reduction is a heavy node: the planner gives it a step of its own (a fused reduction kernel
that also computes the elementwise expression feeding it), and whatever reads its result fuses
into a following elementwise step. Result dtypes are NumPy's, asked of NumPy once per case.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core import dtypes as _dt
from lazytensor.core.expr import Expr, heavy_over_tensor
from lazytensor.core.operand import Operand
from lazytensor.kernels.program import Reduction
from lazytensor.core import tensor as _tensor
from lazytensor.ops.views import ravel, reshape

_NUMPY = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "any": np.any, "all": np.all,
          "mean": np.mean, "var": np.var, "std": np.std, "argmax": np.argmax, "argmin": np.argmin}
_dtypes: dict = {}
_COMPLEX_KINDS = ("sum", "prod", "mean", "any", "all")


def _result_dtype(kind: str, src: np.dtype, dtype) -> np.dtype:
    key = (kind, src, dtype)
    out = _dtypes.get(key)
    if out is None:
        sample = np.ones(2, src)
        kwargs = {} if dtype is None else {"dtype": dtype}
        out = _dtypes[key] = np.dtype(_NUMPY[kind](sample, **kwargs).dtype)
    return out


def _accumulator(kind: str, src: np.dtype, out: np.dtype) -> np.dtype:
    """Sums, products and moments of floats accumulate in float64, bfloat16's in float32 (as PyTorch's:
    NumPy's ml_dtypes loop would add in bfloat16); integers in their result type."""
    if kind in ("argmax", "argmin", "max", "min"):
        return src if src != np.float16 and src != _dt.BFLOAT16 else np.dtype(np.float32)
    if out.kind == "c":
        return np.dtype(np.complex128)   # complex64 sums, products and means too, as floats in double
    if kind in ("any", "all"):
        return np.dtype(bool)
    if out == _dt.BFLOAT16 or (src == _dt.BFLOAT16 and out.kind != "f"):
        return np.dtype(np.float32)
    if out.kind == "f" or kind in ("mean", "var", "std"):
        return np.dtype(np.float64)      # float16/32 sums and moments accumulate in double
    return out


def _axes(axis, ndim: int) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for a in items:
        a = int(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(f"axis {a} is out of bounds for array of dimension {ndim}")
        a %= ndim
        if a in out:
            raise ValueError("duplicate value in 'axis'")
        out.append(a)
    return tuple(sorted(out))


# (kind, axis, keepdims, dtype, ddof, shape, dtype of x) -> (spec, out shape, out dtype, keepdims shape):
# what reduce() decides from those alone, for operands it takes as they are (not the raveled or
# reshaped ones below). One Reduction object per case, so the backends can key what they learn
# on its identity (kernels/cpu/backend.py's ready reductions).
_decided: dict = {}
_specs: dict = {}


def reduce(kind: str, x, axis=None, keepdims=False, dtype=None, ddof=0):
    key = (kind, axis, keepdims, dtype, ddof, x.shape, x.dtype) if isinstance(x, Operand) else None
    try:
        hit = _decided.get(key)
    except TypeError:           # an axis list or an unhashable dtype: decided afresh
        hit = key = None
    if hit is not None:
        spec, out_shape, out_dtype, kept = hit
        if type(x) is _tensor.Tensor:
            node = heavy_over_tensor("reduce", x, out_shape, out_dtype, spec)
        else:
            node = Expr("reduce", (x,), out_shape, out_dtype, x.device, heavy=True, attrs=spec)
        return reshape(node, kept) if keepdims else node
    x0 = x = _tensor.as_node(x)
    if kind in ("argmax", "argmin"):
        if isinstance(axis, tuple):
            raise TypeError(f"{kind} takes a single axis or None")
        if dtype is not None:
            raise TypeError(f"{kind} has no dtype argument")
    if dtype is not None:
        dtype = _dt.check_supported(dtype)
    axes = _axes(axis, len(x.shape))
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))   # the shape keepdims gives
    if kind in ("argmax", "argmin") and axis is None and len(x.shape) > 1:
        x = ravel(x)
        axes = (0,)
    if not axes:    # a 0-d input or axis=(): each element is reduced alone, over a unit axis
        x = reshape(x, tuple(x.shape) + (1,))
        axes = (len(x.shape) - 1,)
    if (x.dtype.kind == "c" or (dtype is not None and dtype.kind == "c")) and kind not in _COMPLEX_KINDS:
        raise TypeError(f"{kind} is not defined for complex dtypes in lazytensor (sum, prod, mean, any and all are)")
    out_dtype = _result_dtype("var" if kind == "std" else kind, x.dtype, dtype)
    if kind == "std":
        out_dtype = _result_dtype("std", x.dtype, dtype)
    reduced = 1
    for a in axes:
        reduced *= x.shape[a]
    out_shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if reduced == 0 and kind in ("max", "min", "argmax", "argmin"):      # (an empty result too, as NumPy)
        if kind in ("argmax", "argmin"):
            raise ValueError(f"attempt to get {kind} of an empty sequence")
        name = {"max": "maximum", "min": "minimum"}[kind]
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
    spec = Reduction("var" if kind == "std" else kind, axes, tuple(x.shape),
                     _accumulator(kind, x.dtype, out_dtype), out_dtype, int(ddof), kind == "std")
    spec = _specs.setdefault(spec, spec)      # axis=1 and axis=-1: one spec object
    if key is not None and x is x0 and type(ddof) is int:
        if len(_decided) > 4096:
            _decided.clear()
            _specs.clear()
        _decided[key] = (spec, out_shape, out_dtype, kept)
    node = Expr("reduce", (x,), out_shape, out_dtype, x.device, heavy=True, attrs=spec)
    if keepdims:
        node = reshape(node, kept)
    return node


def _method(kind):
    def f(x, axis=None, dtype=None, keepdims=False):
        return reduce(kind, x, axis=axis, keepdims=keepdims, dtype=dtype)
    f.__name__ = f.__qualname__ = kind
    f.__doc__ = f"np.{kind} over `axis` (None: all), as one fused kernel with the expression feeding it."
    return f


sum = _method("sum")
prod = _method("prod")
mean = _method("mean")


def max(x, axis=None, keepdims=False):
    """np.max; NaN propagates."""
    return reduce("max", x, axis=axis, keepdims=keepdims)


def min(x, axis=None, keepdims=False):
    """np.min; NaN propagates."""
    return reduce("min", x, axis=axis, keepdims=keepdims)


def any(x, axis=None, keepdims=False):
    return reduce("any", x, axis=axis, keepdims=keepdims)


def all(x, axis=None, keepdims=False):
    return reduce("all", x, axis=axis, keepdims=keepdims)


def var(x, axis=None, dtype=None, ddof=0, keepdims=False):
    """np.var, in one pass (Welford/Chan), so it is one kernel."""
    return reduce("var", x, axis=axis, keepdims=keepdims, dtype=dtype, ddof=ddof)


def std(x, axis=None, dtype=None, ddof=0, keepdims=False):
    return reduce("std", x, axis=axis, keepdims=keepdims, dtype=dtype, ddof=ddof)


def argmax(x, axis=None, keepdims=False):
    """np.argmax: the first index of the maximum (of the first NaN, if any)."""
    return reduce("argmax", x, axis=axis, keepdims=keepdims)


def argmin(x, axis=None, keepdims=False):
    return reduce("argmin", x, axis=axis, keepdims=keepdims)
