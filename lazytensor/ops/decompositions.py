"""The linalg functions that are library calls: cholesky, inv, solve, det, slogdet, eigh, eigvalsh,
qr, svd and svdvals, NumPy's spellings, each a heavy node (op "linalg") over a stack of matrices.
A function of several results returns one node per result, as NumPy's named tuple; a plan reading
several of them runs the call once (lazytensor.plan.heavy.linalg). Dtypes are np.linalg's: float32,
float64, complex64 and complex128 stay, integers and bool compute in float64, float16 is refused;
the results that are real by definition (eigenvalues of a Hermitian matrix, singular values,
slogdet's logabsdet) are of the real dtype of that precision.

Design: docs/design/linalg.md, section "lazytensor/ops/decompositions.py".
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import Expr, astype
from lazytensor.core.operand import Operand

LinAlgError = np.linalg.LinAlgError


class LinalgSpec(NamedTuple):
    """A linalg node's attributes: the function, its parameters, which of its results the node is,
    and the shapes and dtypes of all its results."""
    fn: str
    params: tuple
    index: int
    shapes: tuple
    dtypes: tuple = ()


class EigResult(NamedTuple):
    eigenvalues: Expr
    eigenvectors: Expr


class EighResult(NamedTuple):
    eigenvalues: Expr
    eigenvectors: Expr


class QRResult(NamedTuple):
    Q: Expr
    R: Expr


class SlogdetResult(NamedTuple):
    sign: Expr
    logabsdet: Expr


class SVDResult(NamedTuple):
    U: Expr
    S: Expr
    Vh: Expr


def operand(x):
    """x as an operand of an expression: a Tensor or expression itself, an array or a nested list a
    CPU tensor over a copy (np.linalg takes array-likes)."""
    if isinstance(x, Operand):
        return x
    return _tensor.as_node(x if isinstance(x, np.ndarray) else np.asarray(x))


def compute_dtype(*dtypes) -> np.dtype:
    """np.linalg's dtype for these operands (its _commonType): complex when any operand is complex,
    single precision only when every operand is float32 or complex64, double otherwise; float16 is
    refused as NumPy refuses it."""
    single, cplx = True, False
    for d in dtypes:
        if d == np.float16:
            raise TypeError("array type float16 is unsupported in linalg")
        if d.kind == "c" and d not in (np.complex64, np.complex128):
            raise TypeError(f"array type {d.name} is unsupported in linalg")
        cplx = cplx or d.kind == "c"
        single = single and d in (np.float32, np.complex64)
    if cplx:
        return np.dtype(np.complex64 if single else np.complex128)
    return np.dtype(np.float32 if single else np.float64)


def real_dtype(dtype) -> np.dtype:
    """The real dtype of dtype's precision (complex64 -> float32): that of eigenvalues of a Hermitian
    matrix, singular values and logabsdet."""
    return np.dtype(dtype).type(0).real.dtype


def stacked(x, fn: str, square: bool = True):
    """x as an operand, checked as np.linalg checks it: at least 2-D, square in its last two axes."""
    x = operand(x)
    if x.ndim < 2:
        raise LinAlgError(f"{x.ndim}-dimensional array given. Array must be at least two-dimensional")
    if square and x.shape[-1] != x.shape[-2]:
        raise LinAlgError("Last 2 dimensions of the array must be square")
    return x


def _nodes(fn, params, args, shapes, dtype, real=()):
    """One node per result of `fn` (args already of `dtype`); the results numbered in `real` are of
    dtype's real dtype."""
    device = args[0].device
    for a in args[1:]:
        if a.device != device:
            raise ValueError(f"linalg.{fn}: operands on {device!r} and {a.device!r}: move one with "
                             f"lt.asarray(x, device={device!r})")
    shapes = tuple(tuple(s) for s in shapes)
    dtypes = tuple(real_dtype(dtype) if k in real else dtype for k in range(len(shapes)))
    return tuple(Expr("linalg", tuple(args), shape, dt, device, heavy=True,
                      attrs=LinalgSpec(fn, params, k, shapes, dtypes))
                 for k, (shape, dt) in enumerate(zip(shapes, dtypes)))


def _unary(fn, x, params, shapes, real=()):
    dtype = compute_dtype(x.dtype)
    return _nodes(fn, params, (astype(x, dtype),), shapes, dtype, real)


def cholesky(a, /, *, upper=False):
    """np.linalg.cholesky: the lower factor L of a = L @ L.T (upper=True: the upper U of a = U.T @ U).
    Reads the lower (upper) triangle; LinAlgError when a is not positive definite."""
    a = stacked(a, "cholesky")
    return _unary("cholesky", a, (bool(upper),), (a.shape,))[0]


def inv(a):
    """np.linalg.inv; LinAlgError for a singular matrix."""
    a = stacked(a, "inv")
    return _unary("inv", a, (), (a.shape,))[0]


def det(a):
    """np.linalg.det: one value per matrix of the stack."""
    a = stacked(a, "det")
    return _unary("det", a, (), (a.shape[:-2],))[0]


def slogdet(a):
    """np.linalg.slogdet: (sign, logabsdet) per matrix; sign 0 and logabsdet -inf where singular. Of a
    complex matrix the sign is complex (of magnitude 1) and logabsdet real."""
    a = stacked(a, "slogdet")
    return SlogdetResult(*_unary("slogdet", a, (), (a.shape[:-2],) * 2, real=(1,)))


def _uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    return UPLO


def eigh(a, UPLO="L"):
    """np.linalg.eigh: eigenvalues (real) in ascending order and the eigenvectors as columns, of a
    symmetric (Hermitian) matrix given by its lower (UPLO="U": upper) triangle."""
    a = stacked(a, "eigh")
    return EighResult(*_unary("eigh", a, (_uplo(UPLO),), (a.shape[:-1], a.shape), real=(0,)))


def eigvalsh(a, UPLO="L"):
    """np.linalg.eigvalsh: eigh's eigenvalues alone."""
    a = stacked(a, "eigvalsh")
    return _unary("eigvalsh", a, (_uplo(UPLO),), (a.shape[:-1],), real=(0,))[0]


def eig(a):
    """The standard's eig (2025.12): eigenvalues and right eigenvectors (columns) of a general square
    matrix, NumPy's values, always complex (complex64 of float32 and complex64): np.linalg.eig's
    dtype depends on the values (real when every eigenvalue is), which a lazy result cannot."""
    a = stacked(a, "eig")
    return EigResult(*_complex("eig", a, (a.shape[:-1], a.shape)))


def eigvals(a):
    """The standard's eigvals (2025.12): eig's eigenvalues alone, complex."""
    a = stacked(a, "eigvals")
    return _complex("eigvals", a, (a.shape[:-1],))[0]


def _complex(fn, x, shapes):
    dtype = compute_dtype(x.dtype)
    out = np.dtype(np.complex64 if dtype in (np.float32, np.complex64) else np.complex128)
    # The call computes in the operand's dtype; its results (real ones too) are written into complex arrays.
    return _nodes(fn, (), (astype(x, dtype),), shapes, out)


def qr(a, mode="reduced"):
    """np.linalg.qr: (Q, R) for mode "reduced" (Q m x k, R k x n, k = min(m, n)) and "complete"
    (Q m x m, R m x n); R alone for "r"; LAPACK's (h, tau) for "raw"."""
    a = stacked(a, "qr", square=False)
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = min(m, n)
    shapes = {"reduced": ((*batch, m, k), (*batch, k, n)), "complete": ((*batch, m, m), (*batch, m, n)),
              "r": ((*batch, k, n),), "raw": ((*batch, n, m), (*batch, k))}.get(mode)
    if shapes is None:
        raise ValueError(f"Unrecognized mode '{mode}'")
    out = _unary("qr", a, (mode,), shapes)
    return out[0] if mode == "r" else QRResult(*out) if mode != "raw" else out


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """np.linalg.svd: (U, S, Vh) with a = U @ (S[..., None] * Vh), singular values in descending
    order; S alone when compute_uv is false. hermitian: a is symmetric (its eigendecomposition)."""
    a = stacked(a, "svd", square=bool(hermitian))
    if not compute_uv:
        return svdvals(a, hermitian=hermitian)
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = min(m, n)
    shapes = (((*batch, m, m), (*batch, k), (*batch, n, n)) if full_matrices
              else ((*batch, m, k), (*batch, k), (*batch, k, n)))
    return SVDResult(*_unary("svd", a, (bool(full_matrices), bool(hermitian)), shapes, real=(1,)))


def svdvals(x, /, *, hermitian=False):
    """np.linalg.svdvals: the singular values, in descending order."""
    x = stacked(x, "svdvals", square=bool(hermitian))
    return _unary("svdvals", x, (bool(hermitian),), (x.shape[:-2] + (min(x.shape[-2:]),),), real=(0,))[0]


def solve(a, b):
    """np.linalg.solve (NumPy 2's rule): x with a @ x = b; b is one vector when 1-D, else a stack of
    matrices (..., M, K) whose batch broadcasts with a's. LinAlgError for a singular a."""
    a = stacked(a, "solve")
    b = operand(b)
    m = a.shape[-1]
    vector = b.ndim == 1
    core = b.shape[0] if vector else (b.shape[-2] if b.ndim >= 2 else None)
    if b.ndim == 0 or core != m:
        sig = "(m,m),(m)->(m)" if vector else "(m,m),(m,n)->(m,n)"
        got = "has 0 dimensions" if b.ndim == 0 else f"has size {core} in its core dimension 0"
        raise ValueError(f"solve: Input operand 1 {got}, which does not match the {m} rows of operand 0 "
                         f"(gufunc signature {sig}): shapes {a.shape} and {b.shape}")
    try:
        batch = tuple(np.broadcast_shapes(a.shape[:-2], () if vector else b.shape[:-2]))
    except ValueError:
        raise ValueError(f"solve: the batch axes of shapes {a.shape} and {b.shape} cannot be broadcast") from None
    shape = batch + ((m,) if vector else (m, b.shape[-1]))
    dtype = compute_dtype(a.dtype, b.dtype)
    return _nodes("solve", (vector,), (astype(a, dtype), astype(b, dtype)), (shape,), dtype)[0]
