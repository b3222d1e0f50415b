"""maximum and minimum on a tie of signed zeros, and with NaN, as NumPy's loops give them: the
second operand in float32 and float64, the first in float16 (NumPy's float16 loop compares with >=
and <=), in both tiers and on CUDA. Compared bit for bit, every pair of the special values."""
import numpy as np
import pytest

import lazytensor as lt

VALUES = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan]
FLOATS = [np.float16, np.float32, np.float64]


def _pairs(dtype):
    a = np.array([x for x in VALUES for _ in VALUES] * 3, dtype)      # (x3: NumPy's vector loops too)
    b = np.array([y for _ in VALUES for y in VALUES] * 3, dtype)
    return a, b


def _same_bits(got, want, what):
    assert got.dtype == want.dtype, what
    assert np.array_equal(np.isnan(got), np.isnan(want)), what
    keep = ~np.isnan(want)
    assert np.array_equal(got[keep], want[keep]), what
    assert np.array_equal(np.signbit(got[keep]), np.signbit(want[keep])), what


def _check(device, dtype, op):
    a, b = _pairs(dtype)
    got = lt.evaluate(getattr(lt, op)(lt.asarray(a, device=device), lt.asarray(b, device=device))).numpy()
    _same_bits(got, getattr(np, op)(a, b), f"{op} {np.dtype(dtype).name} on {device}")


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_ties_and_nan_on_the_cpu(dtype, op):
    _check("cpu", dtype, op)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_the_interpreter_tier_gives_the_same(monkeypatch, dtype, op):
    from lazytensor.kernels.backend import backend_for
    from lazytensor.kernels.cache import KernelCache
    backend = backend_for("cpu")
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    monkeypatch.setattr(backend, "kernels", KernelCache())
    monkeypatch.setattr(backend.compiler, "submit", lambda key, job: None)
    _check("cpu", dtype, op)


@pytest.mark.gpu
@pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")
@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_ties_and_nan_on_cuda(dtype, op):
    _check("cuda", dtype, op)
