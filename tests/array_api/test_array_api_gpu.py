"""The Array API additions on CUDA against NumPy: the data-dependent ones through CuPy (unique_*,
searchsorted), the lazy ones as fused kernels (count_nonzero, vecdot, diff, tril/triu, the
standard's floor_divide) and tensordot's matmul. Skipped without CuPy and a GPU."""
from __future__ import annotations

import numpy as np
import pytest

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402
import lazytensor.array_api as xp  # noqa: E402


def cuda(x):
    return lt.asarray(x, device="cuda")


def check(got, want):
    assert got.device == "cuda"
    got = got.numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["int8", "uint32", "float32", "float64"])
def test_unique_on_cuda_matches_numpy(dtype):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 7, size=(5, 9)).astype(dtype)
    if x.dtype.kind == "f":
        x[1, 2] = x[3, 4] = np.nan
        x[0, 0] = -0.0
    values, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                               equal_nan=False)
    got = xp.unique_all(cuda(x))
    check(got.values, values)
    check(got.indices, index.astype(np.int64))
    check(got.inverse_indices, inverse.reshape(x.shape).astype(np.int64))
    check(got.counts, counts.astype(np.int64))
    check(xp.unique_values(cuda(x)), values)


def test_searchsorted_and_count_nonzero_on_cuda():
    a = np.sort(np.random.default_rng(2).standard_normal(50))
    v = np.random.default_rng(3).standard_normal((4, 6))
    for side in ("left", "right"):
        check(xp.searchsorted(cuda(a), cuda(v), side=side), np.searchsorted(a, v, side=side).astype(np.int64))
    x = np.random.default_rng(4).integers(-1, 2, size=(6, 7)).astype(np.float32)
    check(xp.count_nonzero(cuda(x), axis=1, keepdims=True), np.count_nonzero(x, axis=1, keepdims=True).astype(np.int64))


def test_products_diff_and_triangles_on_cuda():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((3, 4, 5)), rng.standard_normal((4, 5, 2))
    np.testing.assert_allclose(xp.tensordot(cuda(a), cuda(b)).numpy(), np.tensordot(a, b), rtol=1e-12)
    i, j = rng.integers(-3, 3, (4, 6)).astype(np.int32), rng.integers(-3, 3, (6,)).astype(np.int32)
    check(xp.vecdot(cuda(i), cuda(j)), np.vecdot(i, j))
    check(xp.diff(cuda(a), n=3, axis=1), np.diff(a, n=3, axis=1))
    check(xp.tril(cuda(a), k=1), np.tril(a, 1))
    check(xp.triu(cuda(i), k=-1), np.triu(i, -1))


def test_floor_divide_follows_the_standard_on_cuda():
    a = np.array([np.inf, -np.inf, 1.0, -1.0, 7.0, np.nan])
    b = np.array([2.0, 2.0, -np.inf, np.inf, -2.0, 1.0])
    got = xp.floor_divide(cuda(a), cuda(b)).numpy()
    np.testing.assert_array_equal(got, [np.inf, -np.inf, -0.0, -0.0, -4.0, np.nan])
    assert np.signbit(got[2]) and np.signbit(got[3])


def test_from_dlpack_and_to_device_on_cuda():
    import cupy
    a = cupy.arange(3.0)
    t = xp.from_dlpack(a)
    assert isinstance(t, lt.Tensor) and t.device == "cuda"
    np.testing.assert_array_equal(t.numpy(), [0.0, 1.0, 2.0])
    h = t.to_device("cpu")
    assert h.device == "cpu" and h.to_device("cuda").device == "cuda"
    assert xp.__array_namespace_info__().devices() == ("cpu", "cuda")
