"""lt.linalg over complex64 and complex128 on CUDA (cuSOLVER through CuPy) against np.linalg on the
host: the results that are unique compared as they are, eigenvectors and singular vectors through
what they reconstruct (their phases are the libraries' choice), the real results' dtypes, empty
stacks; xp.linalg's eig and eigvals. Skipped without CuPy and a GPU."""
from __future__ import annotations

import numpy as np
import pytest

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402
import lazytensor.array_api as xp  # noqa: E402

TOL = {np.dtype(np.float32): 2e-4, np.dtype(np.float64): 1e-10}
SHAPES = [(5, 5), (3, 4, 4), (2, 3, 7, 7), (0, 3, 3), (2, 0, 0), (1, 33, 33)]


def cuda(x):
    return lt.asarray(x, device="cuda")


def host(e):
    assert e.device == "cuda"
    return np.asarray(e)


def same(got, want):
    h, want = host(got), np.asarray(want)
    assert h.dtype == want.dtype and h.shape == want.shape, (h.dtype, want.dtype, h.shape, want.shape)
    tol = TOL[np.dtype(want.dtype.type(0).real.dtype)]
    np.testing.assert_allclose(h, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))


def general(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def hermitian(shape, dtype, seed=0):
    a = general(shape, np.complex128, seed)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def ct(x):
    return lt.conj(lt.swapaxes(x, -1, -2))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_square_functions_on_cuda_match_numpy(shape, dtype):
    h = hermitian(shape, dtype)
    a = (general(shape, np.complex128, 1) + 2 * shape[-1] * np.eye(shape[-1])).astype(dtype)
    same(lt.linalg.cholesky(cuda(h)), np.linalg.cholesky(h))
    same(lt.linalg.cholesky(cuda(h), upper=True), np.linalg.cholesky(h, upper=True))
    same(lt.linalg.inv(cuda(a)), np.linalg.inv(a))
    same(lt.linalg.det(cuda(a)), np.linalg.det(a))
    sign, logdet = lt.linalg.slogdet(cuda(a))
    same(sign, np.linalg.slogdet(a).sign)
    same(logdet, np.linalg.slogdet(a).logabsdet)
    w, v = lt.linalg.eigh(cuda(h))
    same(w, np.linalg.eigvalsh(h))
    same((v * w[..., None, :]) @ ct(v), h)
    same(lt.linalg.eigvalsh(cuda(h), UPLO="U"), np.linalg.eigvalsh(h, UPLO="U"))
    b = general(shape[:-1] + (2,), dtype, 2)
    same(lt.linalg.solve(cuda(a), cuda(b)), np.linalg.solve(a, b))
    u, s, vh = lt.linalg.svd(cuda(h - shape[-1] * np.eye(shape[-1], dtype=dtype)), hermitian=True)
    same(s, np.linalg.svd(h - shape[-1] * np.eye(shape[-1], dtype=dtype), hermitian=True).S)
    same((u * s[..., None, :]) @ vh, h - shape[-1] * np.eye(shape[-1], dtype=dtype))
    ew, ev = xp.linalg.eig(cuda(a))
    same(cuda(a) @ ev, ev * ew[..., None, :])
    same(lt.sort(lt.real(xp.linalg.eigvals(cuda(a))), axis=-1), np.sort(np.linalg.eigvals(a).real, axis=-1))


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 6, 4), (0, 2, 3), (2, 0, 3), (4, 4)])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_rectangular_functions_on_cuda_match_numpy(shape, dtype):
    a = general(shape, dtype, 3)
    q, r = lt.linalg.qr(cuda(a))
    same(q @ r, a)
    same(ct(q) @ q, np.broadcast_to(np.eye(q.shape[-1], dtype=dtype), q.shape[:-2] + (q.shape[-1],) * 2))
    u, s, vh = lt.linalg.svd(cuda(a), full_matrices=False)
    same(s, np.linalg.svdvals(a))
    same((u * s[..., None, :]) @ vh, a)
    same(lt.linalg.svdvals(cuda(a)), np.linalg.svdvals(a))
    same(lt.linalg.pinv(cuda(a)), np.linalg.pinv(a))
    same(lt.linalg.matrix_norm(cuda(a), ord=2), np.linalg.matrix_norm(a, ord=2))
    same(lt.linalg.matrix_norm(cuda(a), ord="nuc"), np.linalg.matrix_norm(a, ord="nuc"))
    same(lt.linalg.vector_norm(cuda(a), ord=3), np.linalg.vector_norm(a, ord=3))
    assert host(lt.linalg.matrix_rank(cuda(a))).tolist() == np.linalg.matrix_rank(a).tolist()


def test_failures_on_cuda_raise_numpys_linalgerror():
    with pytest.raises(np.linalg.LinAlgError):
        host(lt.linalg.inv(cuda(np.array([[1, 2j], [2j, -4]]))))
    with pytest.raises(np.linalg.LinAlgError):
        host(lt.linalg.cholesky(cuda(np.array([[1, 2j], [-2j, 1]], dtype=np.complex64))))
