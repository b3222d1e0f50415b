"""The Array API (2025.12) namespace of lazytensor: `x.__array_namespace__()` returns this module,
so code written against the standard (array-api-compat users, SciPy's and scikit-learn's array API
support) takes tensors. Every name is lazytensor's own function (results stay lazy until a value is
needed) under the standard's name and signature; where the standard and NumPy differ, this module
follows the standard (floor_divide's special cases, var/std take `correction`, sort is stable and
takes `descending`, astype takes `copy`, ...), and the `lt` namespace follows NumPy.

The linalg extension is `linalg` (lazytensor.array_api.linalg), the fft extension `fft`
(lazytensor.array_api.fft). Functions lazytensor does not have are absent rather than eager. The conformance suite runs with `make array-api`
(tests/array_api/run.sh; docs/benchmarks.md, "Array API conformance").
"""
from __future__ import annotations

import numpy as _np

import lazytensor as _lt
from lazytensor.core.operand import Operand as _Operand

__array_api_version__ = "2025.12"

# -- data types and constants ---------------------------------------------------------------------
bool = _np.bool_  # noqa: A001
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float32, float64 = _np.float32, _np.float64
complex64, complex128 = _np.complex64, _np.complex128
e, inf, nan, newaxis, pi = _lt.e, _lt.inf, _lt.nan, _lt.newaxis, _lt.pi
can_cast = _np.can_cast
from lazytensor.array_api.dtype_info import finfo as finfo, iinfo as iinfo  # noqa: E402


def result_type(*arrays_and_dtypes):
    return _np.result_type(*(a.dtype if isinstance(a, _Operand) else a for a in arrays_and_dtypes))


def isdtype(dtype, kind):
    return _np.isdtype(_np.dtype(dtype), kind)


def astype(x, dtype, /, *, copy=True, device=None):
    if device is not None and device != x.device:
        x = _lt.asarray(x, device=device)
    if not copy and x.dtype == _np.dtype(dtype):
        return x
    return _lt.astype(x, dtype) if x.dtype != _np.dtype(dtype) else (x.copy() if copy else x)


# -- elementwise ----------------------------------------------------------------------------------
from lazytensor import (abs, ceil, copysign, cos, cosh, exp, expm1, floor, hypot, isfinite,  # noqa: E402,F401
                        isinf, isnan, log, log1p, log2, log10, logaddexp, logical_and, logical_not, logical_or,
                        logical_xor, maximum, minimum, negative, nextafter, reciprocal, sign, signbit, sin, sinh,
                        sqrt, tan, tanh, trunc)
from lazytensor.ops.ufuncs import (arccos as acos, arccosh as acosh, arcsin as asin, arcsinh as asinh,  # noqa: E402,F401
                                   arctan as atan, arctan2 as atan2, arctanh as atanh,
                                   left_shift as bitwise_left_shift, right_shift as bitwise_right_shift)
from lazytensor.core.expr import apply as _apply  # noqa: E402


def _binary(op):
    def f(x1, x2, /):
        return _apply(op, x1, x2)
    f.__name__ = op
    return f


add, subtract, multiply, divide = (_binary(o) for o in ("add", "subtract", "multiply", "true_divide"))
remainder, pow = (_binary(o) for o in ("remainder", "power"))  # noqa: A001
from lazytensor.array_api.special_cases import floor_divide as floor_divide  # noqa: E402
equal, not_equal, less, less_equal, greater, greater_equal = (
    _binary(o) for o in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"))
bitwise_and, bitwise_or, bitwise_xor = (_binary(o) for o in ("bitwise_and", "bitwise_or", "bitwise_xor"))


def bitwise_invert(x, /):
    return _lt.invert(x)


def positive(x, /):
    return +x


def clip(x, /, min=None, max=None):  # noqa: A002  (the standard's names)
    return _lt.clip(x, min, max)


def square(x, /):
    return _apply("square", x)


def round(x, /):  # noqa: A001
    return _lt.round(x)


# -- creation -------------------------------------------------------------------------------------
def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """lt.asarray with the standard's `copy`: True always gives memory of its own, False never
    copies (a ValueError where it would have to), None copies only where it must."""
    if copy is False:
        _check_no_copy(obj, dtype, device)
    if copy and isinstance(obj, _np.ndarray):
        obj = _np.array(obj, dtype=dtype, copy=True)
    t = _lt.asarray(obj, dtype=dtype, device=device)
    # lt.asarray shares a tensor's memory, and a CuPy or DLPack array's: copy=True copies those.
    shared = t is obj or (not isinstance(obj, (_np.ndarray, _Operand))
                          and (hasattr(obj, "__cuda_array_interface__") or hasattr(obj, "__dlpack__")))
    return t.copy() if copy and shared else t


def _check_no_copy(obj, dtype, device):
    if isinstance(obj, _Operand):
        same = (dtype is None or _np.dtype(dtype) == obj.dtype) and (device is None or device == obj.device)
        if not isinstance(obj, _lt.Tensor) or not same:
            raise ValueError("asarray(copy=False): this needs a copy (an expression's values, another dtype or "
                             "device); pass copy=None to allow one")
    elif isinstance(obj, _np.ndarray):
        if (dtype is not None and _np.dtype(dtype) != obj.dtype) or device not in (None, "cpu"):
            raise ValueError("asarray(copy=False): a NumPy array of another dtype or for another device needs "
                             "a copy; pass copy=None to allow one")
    elif not hasattr(obj, "__dlpack__") and not hasattr(obj, "__cuda_array_interface__"):
        raise ValueError(f"asarray(copy=False): a {type(obj).__name__} has no memory to share; pass copy=None")


from lazytensor import (arange, empty, empty_like, eye, full, full_like, linspace, ones,  # noqa: E402,F401
                        ones_like, zeros, zeros_like)

# -- manipulation, searching, sorting, indexing -----------------------------------------------------
# max and min are the reductions, re-exported by name: clip's parameters of those names shadow them in clip only.
from lazytensor import (broadcast_to, expand_dims, flip, moveaxis, repeat, roll, squeeze, stack,  # noqa: E402,F401
                        tile, argmax, argmin, nonzero, where, take, cumulative_sum,
                        cumulative_prod, all, any, max as max, min as min, mean, prod, sum)


def concat(arrays, /, *, axis=0):
    return _lt.concatenate(arrays, axis=axis)


def reshape(x, /, shape, *, copy=None):
    """A view of x in `shape` (lazytensor's reshapes are views of the values; copy=True copies)."""
    out = _lt.reshape(x, shape)
    return _lt.asarray(out).copy() if copy else out


def take_along_axis(x, indices, /, *, axis=-1):
    """The standard's take_along_axis: axis defaults to the last (NumPy's has no default)."""
    return _lt.take_along_axis(x, indices, axis)


def permute_dims(x, /, axes):
    return _lt.transpose(x, axes)


def sort(x, /, *, axis=-1, descending=False, stable=True):
    return _lt.sort(x, axis=axis, kind="stable" if stable else None, descending=descending)


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    return _lt.argsort(x, axis=axis, stable=stable, descending=descending)


# -- statistics: the standard's `correction` where NumPy has ddof ---------------------------------------
def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    return _lt.var(x, axis=axis, ddof=correction, keepdims=keepdims)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return _lt.std(x, axis=axis, ddof=correction, keepdims=keepdims)


# -- linear algebra, searching, sets, utilities --------------
from lazytensor import (matmul, matrix_transpose, tensordot, vecdot, count_nonzero, searchsorted,  # noqa: E402,F401
                        unique_all, unique_counts, unique_inverse, unique_values, diff, unstack, tril, triu)


def meshgrid(*arrays, indexing="xy"):
    """Coordinate grids as broadcast views, in a tuple (the standard's since 2025.12, and NumPy 2's)."""
    return _lt.meshgrid(*arrays, indexing=indexing)


def broadcast_arrays(*arrays):
    """The operands as broadcast views, in a tuple (the standard's since 2025.12, and NumPy 2's)."""
    return _lt.broadcast_arrays(*arrays)


from lazytensor import broadcast_shapes as broadcast_shapes  # noqa: E402


def isin(x1, x2, /, *, invert=False):
    """For each element of x1, whether it equals an element of x2 (a bool array of x1's shape; 0-d
    for a scalar x1). Either may be a Python scalar, not both."""
    if not isinstance(x1, _Operand) and not isinstance(x2, _Operand):
        raise TypeError("isin: at least one of x1 and x2 must be an array")
    device = (x1 if isinstance(x1, _Operand) else x2).device
    if not isinstance(x1, _Operand):
        x1 = _lt.asarray(x1, dtype=x2.dtype if type(x1) is not bool else None, device=device)
    return _lt.isin(x1, x2, invert=invert)


def conj(x, /):
    return _lt.conj(x)


def real(x, /):
    return _lt.real(x)


def imag(x, /):
    return _lt.imag(x)


def from_dlpack(x, /, *, device=None, copy=None):
    """A tensor over the memory of any object with __dlpack__ (a copy only if asked, or to move it)."""
    on_cuda = x.__dlpack_device__()[0] in (2, 13)          # kDLCUDA, kDLCUDAManaged
    if on_cuda:
        import cupy
        data = cupy.from_dlpack(x)
        data = data.copy() if copy else data
    else:
        data = _np.from_dlpack(x, copy=copy)
    t = _lt.Tensor(data, "cuda" if on_cuda else "cpu")
    return t if device is None or device == t.device else _lt.asarray(t, device=device)


from lazytensor.array_api import fft, linalg  # noqa: E402,F401
# -- NumPy's spellings beyond the standard, which clients call on a namespace (xarray: einsum, pad,
# quantile, transpose); the standard allows a namespace more names since 2025.12 -------------------
from lazytensor import einsum, pad, quantile, transpose  # noqa: E402,F401


# -- inspection -----------------------------------------------------------------------------------
from lazytensor.array_api.inspection import __array_namespace_info__  # noqa: E402,F401
