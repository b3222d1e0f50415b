"""The linalg functions composed of lazy nodes that exist (views, elementwise ops, reductions, matmul
and the decompositions), each as NumPy's np.linalg computes it, so that it fuses with the work
around it: diagonal (a strided view), trace, outer, cross, matrix_power, matrix_rank, pinv and the
norms (vector_norm, matrix_norm, norm).

Design: docs/design/linalg.md, section "lazytensor/ops/matrix_functions.py".
"""
from __future__ import annotations

import operator

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import astype
from lazytensor.core.operand import Operand
from lazytensor.ops.complex_parts import conj, imag, real
from lazytensor.ops.creation import eye
from lazytensor.ops.decompositions import inv, operand, real_dtype, stacked, svd, svdvals
from lazytensor.ops.elementwise import abs as _abs, sqrt, where
from lazytensor.ops.joining import stack
from lazytensor.ops.matmul import matmul
from lazytensor.ops.reductions import reduce
from lazytensor.ops.views import broadcast_to, expand_dims, moveaxis, reshape, swapaxes


def diagonal(x, /, *, offset=0):
    """np.linalg.diagonal: the `offset`-th diagonal of each matrix (the last two axes), a strided view
    of the matrices flattened (k elements every m + 1)."""
    x = operand(x)
    if x.ndim < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    offset = operator.index(offset)
    batch, (n, m) = x.shape[:-2], x.shape[-2:]
    if offset >= 0:
        k, start = max(0, min(n, m - offset)), offset
    else:
        k, start = max(0, min(n + offset, m)), -offset * m
    flat = reshape(x, batch + (n * m,))
    if k == 0:
        return flat[..., 0:0]
    return flat[..., start:start + (k - 1) * (m + 1) + 1:m + 1]


def trace(x, /, *, offset=0, dtype=None):
    """np.linalg.trace: each matrix's `offset`-th diagonal summed (np.sum's dtypes)."""
    return reduce("sum", diagonal(x, offset=offset), axis=-1, dtype=dtype)


def outer(x1, x2, /):
    """np.linalg.outer of two 1-D arrays: x1[i] * x2[j]."""
    x1, x2 = operand(x1), operand(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are x1.ndim={x1.ndim} and "
                         f"x2.ndim={x2.ndim}.")
    return reshape(x1, (x1.shape[0], 1)) * reshape(x2, (1, x2.shape[0]))


def cross(x1, x2, /, *, axis=-1):
    """np.linalg.cross: the cross products of the 3-element vectors along `axis` of x1 and x2, whose
    other axes broadcast (np.cross's order of products and differences)."""
    x1, x2 = operand(x1), operand(x2)
    axis = operator.index(axis)
    for x in (x1, x2):
        if not -x.ndim <= axis < x.ndim:
            raise np.exceptions.AxisError(axis, x.ndim)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"Both input arrays must be (arrays of) 3-dimensional vectors, but they are "
                         f"{x1.shape[axis]} and {x2.shape[axis]} dimensional instead.")
    dtype = np.promote_types(x1.dtype, x2.dtype)
    if dtype == np.bool_:
        raise TypeError("cross: boolean vectors have no cross product (NumPy's subtract refuses bool)")
    a, b = (moveaxis(astype(x, dtype), axis, -1) for x in (x1, x2))
    a0, a1, a2 = (a[..., i] for i in range(3))
    b0, b1, b2 = (b[..., i] for i in range(3))
    out = stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
    return moveaxis(out, -1, axis % out.ndim)


def matrix_power(a, n):
    """np.linalg.matrix_power: a @ a @ ... (n times) by NumPy's binary decomposition; n = 0 the
    identity of a's dtype, n < 0 the power of inv(a)."""
    a = stacked(a, "matrix_power")
    try:
        n = operator.index(n)
    except TypeError as e:
        raise TypeError("exponent must be an integer") from e
    if n == 0:
        identity = broadcast_to(eye(a.shape[-1], dtype=bool, device=a.device), a.shape)
        return where(identity, a.dtype.type(1), a.dtype.type(0))
    if n < 0:
        a, n = inv(a), -n
    if n == 1:
        return a
    if n == 2:
        return matmul(a, a)
    if n == 3:
        return matmul(matmul(a, a), a)
    z = result = None
    while n > 0:
        z = a if z is None else matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


def _column(v, like):
    """A tolerance (a number, an array, a tensor) with a unit axis appended, on like's device; a
    number keeps NumPy's type (a float64 scalar: np.asarray's, not a weak Python float)."""
    if isinstance(v, Operand):
        return expand_dims(v, -1)
    v = np.asarray(v)
    if v.ndim == 0:
        return v[()]
    return _tensor.asarray(v[..., None], device=like.device)


def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """np.linalg.matrix_rank: how many singular values exceed tol (default rtol, itself by default
    max(M, N) * eps, times the largest singular value), as int64."""
    A = operand(A)
    if A.ndim < 2:
        return astype(reduce("any", A != 0), np.dtype(np.int64))
    S = svdvals(A, hermitian=hermitian)
    if tol is None:
        if rtol is None:
            rtol = max(A.shape[-2:]) * np.finfo(S.dtype).eps
        else:
            rtol = _column(rtol, A)
        tol = _max0(S, -1, keepdims=True) * rtol      # NumPy's initial=0: rank 0 of an empty matrix
    else:
        tol = _column(tol, A)
    return reduce("sum", S > tol, axis=-1, dtype=np.int64)


_NO_VALUE = object()


def pinv(a, rcond=None, hermitian=False, *, rtol=_NO_VALUE):
    """np.linalg.pinv: the pseudo-inverse through the SVD, singular values at or below rcond (by
    default 1e-15; rtol=None: max(M, N) * eps) times the largest one taken as zero. A complex matrix
    is conjugated first, as NumPy does, so the result is the conjugate transpose's pseudo-inverse."""
    a = stacked(a, "pinv", square=False)
    if rcond is None:
        if rtol is _NO_VALUE:
            rcond = 1e-15
        elif rtol is None:
            rcond = max(a.shape[-2:]) * np.finfo(a.dtype).eps
        else:
            rcond = rtol
    elif rtol is not _NO_VALUE:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    m, n = a.shape[-2:]
    if m * n == 0:
        return _tensor.zeros(a.shape[:-2] + (n, m), a.dtype, a.device)
    if a.dtype.kind == "c":
        a = conj(a)
    u, s, vt = svd(a, full_matrices=False, hermitian=hermitian)
    cutoff = _column(rcond if isinstance(rcond, Operand) else np.asarray(rcond), a) * reduce(
        "max", s, axis=-1, keepdims=True)
    large = s > cutoff
    s = where(large, 1 / s, s.dtype.type(0))
    return matmul(swapaxes(vt, -1, -2), expand_dims(s, -1) * swapaxes(u, -1, -2))


# -- norms ------------------------------------------------------------------------------------------

def _float(x):
    """x as NumPy's norms take it: integers and bool as float64 (complex stays)."""
    x = operand(x)
    return x if x.dtype.kind in "fc" else astype(x, np.dtype(np.float64))


def _squares(x):
    """|x|^2 elementwise, NumPy's (x.conj() * x).real: re^2 + im^2 of a complex x, real."""
    if x.dtype.kind != "c":
        return x * x
    re, im = real(x), imag(x)
    return re * re + im * im


def _max0(e, axis, keepdims=False):
    """max over `axis` with NumPy's initial=0: zeros where nothing is reduced."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if any(e.shape[a] == 0 for a in axes):
        kept = [1 if i in [a % e.ndim for a in axes] else d for i, d in enumerate(e.shape)]
        shape = tuple(kept) if keepdims else tuple(d for i, d in enumerate(e.shape) if i not in [a % e.ndim for a in axes])
        return _tensor.zeros(shape, e.dtype, e.device)
    return reduce("max", e, axis=axis, keepdims=keepdims)


def _vector_norm(x, axis, ord, keepdims):
    """norm of x (float) over `axis` (an int or tuple), NumPy's cases."""
    if ord == np.inf:
        return _max0(_abs(x), axis, keepdims)
    if ord == -np.inf:
        return reduce("min", _abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return reduce("sum", astype(x != 0, real_dtype(x.dtype)), axis=axis, keepdims=keepdims)
    if ord == 1:
        return reduce("sum", _abs(x), axis=axis, keepdims=keepdims)
    if ord is None or ord == 2:
        return sqrt(reduce("sum", _squares(x), axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    # NumPy raises in place (absx **= ord): the power and its root in x's dtype.
    absx = _abs(x)
    total = reduce("sum", absx ** absx.dtype.type(ord), axis=axis, keepdims=keepdims)
    return total ** np.reciprocal(total.dtype.type(ord))


def _matrix_norm(x, row, col, ord):
    """The matrix norm over axes (row, col) of x (float), without keepdims (NumPy's norm)."""
    if ord in (2, -2, "nuc"):
        s = svdvals(moveaxis(x, (row, col), (-2, -1)))
        if ord == 2:
            return _max0(s, -1)
        return reduce("min" if ord == -2 else "sum", s, axis=-1)
    if ord in (1, -1):
        col = col - 1 if col > row else col
        summed = reduce("sum", _abs(x), axis=row)
        return _max0(summed, col) if ord == 1 else reduce("min", summed, axis=col)
    if ord in (np.inf, -np.inf):
        row = row - 1 if row > col else row
        summed = reduce("sum", _abs(x), axis=col)
        return _max0(summed, row) if ord == np.inf else reduce("min", summed, axis=row)
    if ord in (None, "fro", "f"):
        return sqrt(reduce("sum", _squares(x), axis=(row, col)))
    raise ValueError("Invalid norm order for matrices.")


def norm(x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm: a vector norm over one axis, a matrix norm over two; axis=None: x's only
    vector or matrix norm, or with ord=None the 2-norm of all of x."""
    x = _float(x)
    nd = x.ndim
    if axis is None and (ord is None or (ord in ("f", "fro") and nd == 2) or (ord == 2 and nd == 1)):
        out = sqrt(reduce("sum", _squares(x)))
        return reshape(out, (1,) * nd) if keepdims else out
    if axis is None:
        axis = tuple(range(nd))
    elif not isinstance(axis, tuple):
        try:
            axis = (operator.index(axis),)
        except TypeError as e:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from e
    axis = tuple(_axis_index(a, nd) for a in axis)
    if len(axis) == 1:
        return _vector_norm(x, axis[0], ord, keepdims)
    if len(axis) != 2:
        raise ValueError("Improper number of dimensions to norm.")
    row, col = axis
    if row == col:
        raise ValueError("Duplicate axes given.")
    out = _matrix_norm(x, row, col, ord)
    if keepdims:
        out = reshape(out, tuple(1 if i in axis else d for i, d in enumerate(x.shape)))
    return out


def _axis_index(a, nd):
    a = operator.index(a)
    if not -nd <= a < nd:
        raise np.exceptions.AxisError(a, nd)
    return a % nd


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """np.linalg.vector_norm: the vector norm over `axis` (None: all of x; a tuple: those axes as one)."""
    x = _float(x)
    if axis is None:
        axes = tuple(range(x.ndim))
    else:
        axes = tuple(_axis_index(a, x.ndim) for a in (axis if isinstance(axis, tuple) else (axis,)))
        if len(set(axes)) != len(axes):
            raise ValueError("duplicate value in 'axis'")
    return _vector_norm(x, axes, ord, keepdims)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """np.linalg.matrix_norm: the matrix norm of each matrix (the last two axes)."""
    x = _float(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_norm: x has {x.ndim} dimensions; it needs at least 2 (a stack of matrices)")
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)
