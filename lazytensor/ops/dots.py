"""np.dot, np.inner and np.outer, built from nodes that exist: dot and inner are matmuls of
(reshaped, transposed) views through tensordot, outer a broadcast product; 0-d operands multiply,
as NumPy's do. Result dtypes are NumPy's promotion of the operands."""
from __future__ import annotations

from lazytensor.core.expr import apply
from lazytensor.ops.matmul import matmul
from lazytensor.ops.operands import operand
from lazytensor.ops.output import to_out
from lazytensor.ops.products import tensordot
from lazytensor.ops.views import ravel, reshape


def dot(a, b, out=None):
    """np.dot: 1-D . 1-D the inner product, 2-D matrix products, N-D . 1-D a sum over the last axis
    of a, N-D . M-D a sum over a's last axis and b's second-to-last."""
    x, y = operand(a), operand(b)
    if x.ndim == 0 or y.ndim == 0:
        result = apply("multiply", x, y)
    elif y.ndim <= 2 and x.ndim <= 2 or y.ndim == 1:
        _aligned(x, y, x.ndim - 1, max(y.ndim - 2, 0))
        result = matmul(x, y)
    else:
        _aligned(x, y, x.ndim - 1, y.ndim - 2)
        result = tensordot(x, y, axes=([-1], [-2]))
    return to_out(result, out)


def inner(a, b):
    """np.inner: the sum of products over the last axes of a and b (0-d operands multiply)."""
    x, y = operand(a), operand(b)
    if x.ndim == 0 or y.ndim == 0:
        return apply("multiply", x, y)
    _aligned(x, y, x.ndim - 1, y.ndim - 1)
    return tensordot(x, y, axes=([-1], [-1]))


def outer(a, b, out=None):
    """np.outer: out[i, j] = a.ravel()[i] * b.ravel()[j]."""
    x, y = ravel(operand(a)), ravel(operand(b))
    return to_out(apply("multiply", reshape(x, (x.shape[0], 1)), reshape(y, (1, y.shape[0]))), out)


def _aligned(x, y, i, j):
    if x.shape[i] != y.shape[j]:
        raise ValueError(f"shapes {tuple(x.shape)} and {tuple(y.shape)} not aligned: {x.shape[i]} (dim {i}) != "
                         f"{y.shape[j]} (dim {j})")
