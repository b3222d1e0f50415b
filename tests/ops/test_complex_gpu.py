"""complex64 and complex128 on the CUDA backend (lt_complex, kernels/cuda/complex_prelude.py) against
NumPy on the host: the elementwise ops, casts, complex scalars, reductions and matmul, with the
tolerances of tests/ops/test_complex.py (finite values: the CUDA functions' special values of
infinite parts are the textbook formulas', not always C99's). Skipped where CuPy or a CUDA device is missing."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402
from lazytensor.core.expr import apply  # noqa: E402

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
RTOL = {C64: 4e-6, C128: 1e-13}
UNARY = ["negative", "conjugate", "absolute", "sign", "isnan", "isinf", "isfinite", "real", "imag", "square",
         "reciprocal", "exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "sinh", "cosh", "arcsin", "arccos",
         "arctan", "arcsinh", "arccosh", "arctanh", "log1p", "expm1", "log2", "log10", "exp2"]
BINARY = ["add", "subtract", "multiply", "true_divide", "power", "equal", "not_equal"]


def _values(dtype, n=4096, seed=0):
    rng = np.random.default_rng(seed)
    mags = 10.0 ** rng.uniform(-4, 1.2, size=(2, n))
    z = (mags[0] * rng.choice([-1, 1], n) + 1j * mags[1] * rng.choice([-1, 1], n))
    z[:8] = [0, -0.0, 1, -1, 1j, -1j, 0.5 + 0.5j, -2 - 0.25j]
    return z.astype(dtype)


def _close(got, want, dtype, op=None, z=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind == "b":
        np.testing.assert_array_equal(got, want)
        return
    scale = np.abs(want.astype(np.complex128))
    if op == "log1p":       # NumPy's formula, log |1 + z|: accurate relative to |1 + z|, as NumPy's is
        scale = np.maximum(scale, np.abs(1 + z.astype(np.complex128)))
    err = np.abs(got.astype(np.complex128) - want.astype(np.complex128))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    bad = finite & ~(err <= 8 * RTOL[dtype] * np.maximum(scale, 1e-30))
    assert not bad.any(), (got[bad][:5], want[bad][:5])


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@pytest.mark.parametrize("op", UNARY)
def test_unary_ops_on_cuda(op, dtype):
    a = _values(dtype)
    with np.errstate(all="ignore"):
        want = getattr(np, op)(a)
    _close(apply(op, lt.asarray(a, device="cuda")), want, dtype, op, a)


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@pytest.mark.parametrize("op", BINARY)
def test_binary_ops_and_scalars_on_cuda(op, dtype):
    a, b = _values(dtype, seed=1), _values(dtype, seed=2)
    if op == "power":
        a, b = a / np.maximum(np.abs(a), 1), (b / np.maximum(np.abs(b), 1) * 3).astype(dtype)
        a = a.astype(dtype)
    x, y = lt.asarray(a, device="cuda"), lt.asarray(b, device="cuda")
    ufunc = {"true_divide": np.divide}.get(op, getattr(np, op, None))
    with np.errstate(all="ignore"):
        _close(apply(op, x, y), ufunc(a, b), dtype)
        _close(apply(op, x, 1.5 - 2j), ufunc(a, dtype.type(1.5 - 2j)), dtype)
        _close(apply(op, x, 3), ufunc(a, dtype.type(3)), dtype)


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
def test_casts_and_promotion_on_cuda(dtype):
    a = _values(dtype)
    x = lt.asarray(a, device="cuda")
    r = lt.asarray(np.arange(a.size, dtype=np.float32), device="cuda")
    _close(x * r + 1j, a * np.arange(a.size, dtype=np.float32) + 1j, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        for dst in ("float16", "float32", "float64", "int32", "bool", "complex64", "complex128"):
            np.testing.assert_array_equal(np.asarray(x.astype(dst)), a.astype(dst))
    # atan2 on the device is within 1 ulp of the host's (not always its bits)
    want = np.angle(a)
    np.testing.assert_allclose(np.asarray(lt.angle(x)), want, rtol=2 * np.finfo(want.dtype).eps, atol=0)


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@pytest.mark.parametrize("kind", ["sum", "mean", "prod"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_reductions_on_cuda(dtype, kind, axis):
    a = _values(dtype).reshape(64, 64)
    if kind == "prod":
        a = np.where(a == 0, 1, a / np.abs(a)).astype(dtype)     # on the unit circle: no overflow
    got = np.asarray(getattr(lt, kind)(lt.asarray(a, device="cuda") * 1j, axis=axis))
    want = getattr(np, kind)((a * 1j).astype(C128), axis=axis)
    assert got.dtype == dtype
    scale = np.sum(np.abs(a.astype(C128)), axis=axis) + 1
    assert (np.abs(got - want) <= 16 * RTOL[dtype] * scale).all()


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
def test_matmul_on_cuda(dtype):
    a, b = _values(dtype).reshape(64, 64), _values(dtype, seed=3).reshape(64, 64)
    got = np.asarray(lt.asarray(a, device="cuda") @ lt.asarray(b, device="cuda"))
    np.testing.assert_allclose(got, a @ b, rtol=1e-4 if dtype == C64 else 1e-12, atol=1e-3 if dtype == C64 else 1e-10)
