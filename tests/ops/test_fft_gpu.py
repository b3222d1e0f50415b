"""lt.fft on the CUDA backend (cuFFT through cupy.fft) against NumPy on the host, and the work around a
transform fused as on the CPU. Skipped where CuPy or a CUDA device is missing."""
from __future__ import annotations

import numpy as np
import pytest

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402

CASES = [("fft", {}), ("ifft", {"n": 12, "axis": 0}), ("rfft", {"norm": "ortho"}), ("irfft", {}), ("hfft", {"n": 9}),
         ("ihfft", {}), ("fftn", {}), ("ifftn", {"axes": (0,)}), ("rfftn", {"s": (6, 5), "axes": (0, 1)}),
         ("irfftn", {"norm": "forward"})]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["single", "double"])
@pytest.mark.parametrize("fn,kwargs", CASES, ids=[c[0] for c in CASES])
def test_transforms_on_cuda_are_numpys(fn, kwargs, dtype):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(8, 10))
    if fn not in ("rfft", "ihfft", "rfftn"):
        a = a + 1j * rng.normal(size=a.shape)
    a = a.astype(np.result_type(dtype, a.dtype))
    want = getattr(np.fft, fn)(np.exp(a * 0.1), **kwargs)
    got = np.asarray(getattr(lt.fft, fn)(lt.exp(lt.asarray(a, device="cuda") * 0.1), **kwargs))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-10,
                               atol=1e-4 * np.abs(want).max() if dtype == np.float32 else 1e-10 * np.abs(want).max())


def test_np_fft_and_shifts_on_cuda():
    a = np.arange(24.0).reshape(4, 6)
    t = lt.asarray(a, device="cuda")
    np.testing.assert_allclose(np.asarray(np.fft.fft2(t)), np.fft.fft2(a), atol=1e-9)
    np.testing.assert_array_equal(np.asarray(lt.fft.fftshift(t)), np.fft.fftshift(a))
    assert lt.fft.fftfreq(8, device="cuda").device == "cuda"
