"""The Array API's linalg extension (`xp.linalg`), the standard's signatures over lazytensor's
lt.linalg: positional-only arrays, keyword-only options, named tuples for eig, eigh, qr, slogdet and
svd, the 2025.12 standard's eig and eigvals (always complex), and the standard's default tolerances
for matrix_rank and pinv (max(M, N) * eps).

Design: docs/design/linalg.md, section "lazytensor/array_api/linalg.py".
"""
from __future__ import annotations

from lazytensor.ops import decompositions as _decompositions, linalg as _la
from lazytensor.ops.linalg import (cross, diagonal, matmul, matrix_norm, matrix_transpose, outer,  # noqa: F401
                                   svdvals, tensordot, trace, vecdot, vector_norm)

__all__ = ["cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "matmul", "matrix_norm",
           "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd",
           "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]


def cholesky(x, /, *, upper=False):
    return _la.cholesky(x, upper=upper)


def det(x, /):
    return _la.det(x)


def eig(x, /):
    """Always complex, as the standard says (np.linalg.eig's dtype depends on the values)."""
    return _decompositions.eig(x)


def eigvals(x, /):
    return _decompositions.eigvals(x)


def eigh(x, /):
    return _la.eigh(x)


def eigvalsh(x, /):
    return _la.eigvalsh(x)


def inv(x, /):
    return _la.inv(x)


def matrix_power(x, n, /):
    return _la.matrix_power(x, n)


def matrix_rank(x, /, *, rtol=None):
    return _la.matrix_rank(x, rtol=rtol)


def pinv(x, /, *, rtol=None):
    """The standard's default rtol (None) is max(M, N) * eps, where NumPy's pinv defaults to 1e-15."""
    return _la.pinv(x, rtol=rtol)


def qr(x, /, *, mode="reduced"):
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return _la.qr(x, mode=mode)


def slogdet(x, /):
    return _la.slogdet(x)


def solve(x1, x2, /):
    return _la.solve(x1, x2)


def svd(x, /, *, full_matrices=True):
    return _la.svd(x, full_matrices=full_matrices)
