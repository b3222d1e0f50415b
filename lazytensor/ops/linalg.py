"""lt.linalg: NumPy's np.linalg over lazy tensors, with its names, signatures, dtypes and errors
(LinAlgError is NumPy's). The decompositions are heavy nodes (lazytensor.ops.decompositions); the
rest are composed of lazy nodes (lazytensor.ops.matrix_functions, lazytensor.ops.products), so
they fuse with the work around them.

Design: docs/design/linalg.md.
"""
from __future__ import annotations

from lazytensor.ops.decompositions import (EighResult, LinAlgError, QRResult, SlogdetResult,  # noqa: F401
                                           SVDResult, cholesky, det, eigh, eigvalsh, inv, qr, slogdet, solve,
                                           svd, svdvals)
from lazytensor.ops.matrix_functions import (cross, diagonal, matrix_norm, matrix_power, matrix_rank,  # noqa: F401
                                             norm, outer, pinv, trace, vector_norm)
from lazytensor.ops import products as _products
from lazytensor.ops.matmul import matmul as _matmul

__all__ = ["EighResult", "LinAlgError", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "cross", "det",
           "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm", "matrix_power", "matrix_rank",
           "matrix_transpose", "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot",
           "trace", "vecdot", "vector_norm"]


def matmul(x1, x2, /):
    """np.linalg.matmul: x1 @ x2."""
    return _matmul(x1, x2)


def matrix_transpose(x, /):
    """np.linalg.matrix_transpose: the last two axes swapped, a view."""
    return _products.matrix_transpose(x)


def tensordot(x1, x2, /, *, axes=2):
    """np.linalg.tensordot: np.tensordot with the standard's keyword-only axes."""
    return _products.tensordot(x1, x2, axes=axes)


def vecdot(x1, x2, /, *, axis=-1):
    """np.linalg.vecdot: sum(x1 * x2) over `axis`."""
    return _products.vecdot(x1, x2, axis=axis)
