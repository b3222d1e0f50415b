"""Linear algebra library calls on arrays: NumPy's LAPACK on the CPU, CuPy's cuSOLVER on CUDA, each
over a stack of matrices at once. Knows arrays only; lazytensor.plan.heavy.linalg decides when one runs.

Design: docs/design/linalg.md, section "kernels/linalg.py".
"""
from __future__ import annotations

import numpy as np

from lazytensor.kernels import launch_log

def run_linalg(backend, fn: str, params: tuple, inputs: list, outs: list) -> None:
    """outs[k][...] = the k-th result of `fn` over `inputs` (arrays of `backend`, one dtype, float32,
    float64, complex64 or complex128, checked by the caller); raises numpy.linalg.LinAlgError as NumPy does (a singular
    matrix for inv and solve, one not positive definite for cholesky, no convergence)."""
    host = backend.host_memory
    if host:
        results = _call(np, fn, params, inputs)
    elif any(a.size == 0 for a in inputs):
        # Empty stacks or 0 x 0 matrices: NumPy's results (det 1, ...) of host arrays, copied over.
        results = [backend.asarray(r) for r in _call(np, fn, params, [np.empty(a.shape, a.dtype) for a in inputs])]
    else:
        import cupy
        import cupyx
        # CuPy leaves a failed factorization's result undefined unless asked: NumPy raises.
        with cupyx.errstate(linalg="raise"):
            results = _call(cupy, fn, params, inputs)
    for out, r in zip(outs, results):
        out[...] = r
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord(f"linalg.{fn}", backend.name, "linalg", int(sum(o.size for o in outs)),
                                                  "memory", 0.0, "LAPACK (NumPy)" if host else "cuSOLVER (CuPy)"))


def _call(xp, fn, params, inputs) -> tuple:
    """The results of `fn` as a tuple of xp arrays (NumPy or CuPy)."""
    la = xp.linalg
    if fn == "cholesky":
        (upper,) = params
        (a,) = inputs
        if xp is np:
            return (la.cholesky(a, upper=upper),)
        # CuPy reads the lower triangle: the upper factor of a is the lower one of a's transpose, transposed.
        return (xp.swapaxes(la.cholesky(xp.swapaxes(a, -1, -2)), -1, -2),) if upper else (la.cholesky(a),)
    if fn == "solve":
        a, b = inputs
        (vector,) = params
        if vector:
            b = b[..., None]
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        # Stacks broadcast to one batch shape and b always a stack of matrices: NumPy 2's meaning,
        # which CuPy (NumPy 1's rule for vectors) reads the same way.
        x = la.solve(xp.broadcast_to(a, batch + a.shape[-2:]), xp.broadcast_to(b, batch + b.shape[-2:]))
        return (x[..., 0] if vector else x,)
    (a,) = inputs
    if fn in ("inv", "det"):
        return (getattr(la, fn)(a),)
    if fn == "slogdet":
        return tuple(la.slogdet(a))
    if fn == "eigh":
        return tuple(la.eigh(a, UPLO=params[0]))
    if fn in ("eig", "eigvals"):
        return _eig(xp, fn, a)
    if fn == "eigvalsh":
        return (la.eigvalsh(a, UPLO=params[0]),)
    if fn == "qr":
        (mode,) = params
        out = la.qr(a, mode=mode)
        return (out,) if mode == "r" else tuple(out)
    if fn == "svd":
        full_matrices, hermitian = params
        if hermitian:
            return _hermitian_svd(xp, a)
        return tuple(la.svd(a, full_matrices=full_matrices))
    if fn == "svdvals":
        (hermitian,) = params
        if hermitian:
            return (xp.flip(xp.sort(xp.abs(la.eigvalsh(a)), axis=-1), axis=-1),)
        return (la.svd(a, compute_uv=False),)
    raise ValueError(f"no linalg function {fn!r}")


def _hermitian_svd(xp, a) -> tuple:
    """np.linalg.svd(a, hermitian=True), NumPy's algorithm in xp (CuPy's svd has no hermitian=):
    the eigendecomposition, singular values the eigenvalues' magnitudes, largest first, and their
    signs moved into Vh (the conjugate transpose of U, signed)."""
    s, u = xp.linalg.eigh(a)
    sgn = xp.sign(s)
    s = xp.abs(s)
    order = xp.flip(xp.argsort(s, axis=-1), axis=-1)
    sgn = xp.take_along_axis(sgn, order, axis=-1)
    s = xp.take_along_axis(s, order, axis=-1)
    u = xp.take_along_axis(u, order[..., None, :], axis=-1)
    return u, s, xp.conj(xp.swapaxes(u * sgn[..., None, :], -1, -2))


def _eig(xp, fn, a) -> tuple:
    """eig's (eigenvalues, eigenvectors) or eigvals' eigenvalues of general square matrices (real
    ones too when every eigenvalue is: the caller's complex results take them). A CuPy without
    eig (before cuSOLVER's Xgeev) computes on the host and copies the results over."""
    if xp is not np and not hasattr(xp.linalg, fn):
        return tuple(xp.asarray(r) for r in _eig(np, fn, xp.asnumpy(a)))
    if fn == "eigvals":
        return (xp.linalg.eigvals(a),)
    return tuple(xp.linalg.eig(a))
