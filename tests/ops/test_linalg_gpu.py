"""lt.linalg on CUDA (cuSOLVER through CuPy) against np.linalg on the host: values (up to the signs
of eigenvectors and singular vectors, which the libraries choose apart), dtypes and shapes, stacks,
empty stacks and 0 x 0 matrices, NumPy's LinAlgError; the linalg bench runs (its timings are
printed, not asserted). Skipped without CuPy and a GPU."""
from __future__ import annotations

import numpy as np
import pytest

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402

TOL = {np.dtype(np.float32): 2e-4, np.dtype(np.float64): 1e-10}
SHAPES = [(5, 5), (3, 4, 4), (2, 3, 7, 7), (0, 3, 3), (2, 0, 0), (1, 33, 33)]


def cuda(x):
    return lt.asarray(x, device="cuda")


def host(e):
    assert e.device == "cuda"
    return np.asarray(e)


def spd(shape, dtype, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def square(shape, dtype, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) + 2 * shape[-1] * np.eye(shape[-1])).astype(dtype)


def same(got, want):
    h = host(got)
    assert h.dtype == want.dtype and h.shape == want.shape
    tol = TOL[want.dtype]
    np.testing.assert_allclose(h, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))


def same_columns(got, want):
    """Columns equal up to sign (eigenvectors, singular vectors)."""
    h = host(got)
    assert h.dtype == want.dtype and h.shape == want.shape
    signs = np.sign(np.sum(h * want, axis=-2, keepdims=True))
    same(cuda(h * np.where(signs == 0, 1, signs).astype(h.dtype)), want)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_square_functions_on_cuda_match_numpy(shape, dtype):
    s, a = spd(shape, dtype), square(shape, dtype)
    same(lt.linalg.cholesky(cuda(s)), np.linalg.cholesky(s))
    same(lt.linalg.cholesky(cuda(s), upper=True), np.linalg.cholesky(s, upper=True))
    same(lt.linalg.inv(cuda(a)), np.linalg.inv(a))
    same(lt.linalg.det(cuda(a)), np.linalg.det(a))
    sign, logdet = lt.linalg.slogdet(cuda(a))
    same(sign, np.linalg.slogdet(a).sign)
    same(logdet, np.linalg.slogdet(a).logabsdet)
    w, v = lt.linalg.eigh(cuda(s))
    nw, nv = np.linalg.eigh(s)
    same(w, nw)
    same_columns(v, nv)
    same(lt.linalg.eigvalsh(cuda(s), UPLO="U"), np.linalg.eigvalsh(s, UPLO="U"))
    b = np.random.default_rng(1).standard_normal(shape[:-1] + (2,)).astype(dtype)
    same(lt.linalg.solve(cuda(a), cuda(b)), np.linalg.solve(a, b))
    v1 = np.ones(shape[-1], dtype)
    same(lt.linalg.solve(cuda(a), cuda(v1)), np.linalg.solve(a, v1))


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 6, 4), (0, 2, 3), (2, 0, 3), (4, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rectangular_functions_on_cuda_match_numpy(shape, dtype):
    a = np.random.default_rng(2).standard_normal(shape).astype(dtype)
    q, r = lt.linalg.qr(cuda(a))
    nq, nr = np.linalg.qr(a)
    same(q @ r, a)
    same_columns(q, nq)
    same_columns(lt.swapaxes(r, -1, -2), np.swapaxes(nr, -1, -2))      # R's rows carry Q's column signs
    qc, rc = lt.linalg.qr(cuda(a), "complete")
    nqc, nrc = np.linalg.qr(a, "complete")
    assert (host(qc).shape, host(rc).shape) == (nqc.shape, nrc.shape)
    same(qc @ rc, a)
    u, s, vh = lt.linalg.svd(cuda(a), full_matrices=False)
    nu, ns, nvh = np.linalg.svd(a, full_matrices=False)
    same(s, ns)
    same_columns(u, nu)
    same_columns(lt.swapaxes(vh, -1, -2), np.swapaxes(nvh, -1, -2))
    same(lt.linalg.svdvals(cuda(a)), np.linalg.svdvals(a))
    full = lt.linalg.svd(cuda(a))
    assert [host(f).shape for f in full] == [f.shape for f in np.linalg.svd(a)]
    same(lt.linalg.pinv(cuda(a)), np.linalg.pinv(a))
    same(lt.linalg.matrix_norm(cuda(a), ord=2), np.linalg.matrix_norm(a, ord=2))


def test_hermitian_svd_on_cuda():
    s = spd((3, 5, 5), np.float64) - 4 * np.eye(5)
    u, sv, vh = lt.linalg.svd(cuda(s), hermitian=True)
    nu, ns, nvh = np.linalg.svd(s, hermitian=True)
    same(sv, ns)
    same((u * sv[..., None, :]) @ vh, s)


def test_failures_on_cuda_raise_numpys_linalgerror():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(np.linalg.LinAlgError):
        host(lt.linalg.inv(cuda(singular)))
    with pytest.raises(np.linalg.LinAlgError):
        host(lt.linalg.cholesky(cuda(np.array([[1.0, 2.0], [2.0, 1.0]]))))
    same(lt.linalg.det(cuda(singular)), np.linalg.det(singular))


def test_fused_work_around_a_call_on_cuda():
    s = spd((4, 8, 8), np.float64)
    x = cuda(s)
    w, v = lt.linalg.eigh(x * 2.0 + 1.0)
    got = lt.exp(-w)[..., None, :] * v @ lt.swapaxes(v, -1, -2)
    nw, nv = np.linalg.eigh(s * 2.0 + 1.0)
    same(got, np.exp(-nw)[..., None, :] * nv @ np.swapaxes(nv, -1, -2))
    text = lt.explain(lt.linalg.inv(x) + 1.0)
    assert "Linalg on cuda: inv((4, 8, 8))" in text and "cuSOLVER through CuPy" in text


def test_linalg_bench_runs_every_call_on_cuda():
    """The speed of each call against CuPy's is the bench's (`python -m lazytensor bench --device cuda
    --suite linalg`, no timing asserted here): every call, both shapes, three implementations."""
    from lazytensor.bench.linalg import CALLS, run_linalg_bench
    lines = []
    table = run_linalg_bench(lines.append)
    print("\n".join(lines))
    assert len(table.rows) == len(CALLS) * 2 * 3 and all(s > 0 for _, _, s in table.rows)
