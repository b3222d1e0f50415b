"""bfloat16 on a GPU (__nv_bfloat16 storage, float registers) against the CPU tests' oracle, ml_dtypes'
own loops: every elementwise op bit for bit where exactly rounded, within ULPS elsewhere, on drawn
bit patterns with NaN, inf, subnormals and -0.0; casts; per-channel rows and vector layouts;
reductions (float32 accumulation); matmul through cuBLAS (bfloat16 in and out, float32 compute);
pooling. Skipped where CuPy or a CUDA device is missing."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402
from lazytensor.kernels.ops import ALL_DTYPES, BFLOAT16  # noqa: E402
from tests.ops.test_bfloat16 import (BINARY, TRANSCENDENTAL, ULPS, UNARY, _reference, assert_same,  # noqa: E402
                                     bf16_arrays)
from tests.ops.test_bfloat16_heavy import _f64, assert_rounded_once  # noqa: E402

BF = BFLOAT16


def cuda(a):
    return lt.asarray(a, device="cuda")


def _check_ops(a, b):
    x, y = cuda(a), cuda(b)
    unary = lt.evaluate(*[getattr(np, op)(x) if hasattr(np, op) else getattr(lt, op)(x) for op in UNARY])
    binary = lt.evaluate(*[getattr(np, op)(x, y) for op in BINARY])
    for op, got in zip(UNARY, unary):
        assert got.device == "cuda"
        assert_same(got.numpy(), _reference(op, a), op, ULPS if op in TRANSCENDENTAL else 0)
    for op, got in zip(BINARY, binary):
        assert_same(got.numpy(), _reference(op, a, b), op, ULPS if op in TRANSCENDENTAL else 0)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 300).flatmap(lambda n: st.tuples(bf16_arrays(n), bf16_arrays(n))))
def test_every_op_against_ml_dtypes_on_cuda(pair):
    _check_ops(*pair)


def test_every_bit_pattern_on_cuda():
    """All 65536 patterns (vector loads and the scalar tail) against a shuffled copy."""
    a = np.arange(1 << 16, dtype=np.uint16).view(BF)
    b = np.random.default_rng(0).permutation(a)
    _check_ops(a, b)
    _check_ops(a[3:], b[:-3])            # misaligned: scalar loads


def test_casts_on_cuda():
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 1 << 16, 5000).astype(np.uint16).view(BF)
    x = cuda(bits)
    with np.errstate(all="ignore"):
        for dt in ALL_DTYPES:
            got, want = x.astype(dt).numpy(), bits.astype(dt)
            if np.dtype(dt).kind in "iu":       # out of range (NaN too) is undefined: NumPy warns, ml_dtypes
                t = np.trunc(bits.astype(np.float64))   # versions differ (0, or wrapped through int)
                info = np.iinfo(dt)
                keep = (t >= info.min) & (t < float(info.max) + 1)     # (float(int64 max) rounds up to 2^63)
                got, want = got[keep], want[keep]
            assert_same(got, want, f"bfloat16 -> {dt}")
        f64 = rng.standard_normal(5000) * 10.0 ** rng.integers(-40, 39, 5000)
        assert_same(cuda(f64).astype(BF).numpy(), f64.astype(BF), "float64 -> bfloat16")
        f32 = f64.astype(np.float32)
        assert_same(cuda(f32).astype(BF).numpy(), f32.astype(BF), "float32 -> bfloat16")
        i64 = rng.integers(-2 ** 40, 2 ** 40, 5000)
        assert_same(cuda(i64).astype(BF).numpy(), i64.astype(BF), "int64 -> bfloat16")
    v = 1 + 2 ** -8 + 2 ** -30
    assert_same((cuda(np.zeros(4, BF)) + v).numpy(), np.zeros(4, BF) + v, "a weak Python float")


def test_per_channel_rows_and_mixed_dtypes():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1001, 64)).astype(BF)
    m, s = (rng.standard_normal(64).astype(BF) for _ in range(2))
    got = lt.evaluate(lt.relu((cuda(x) - cuda(m)) * cuda(s) + 0.5))
    assert_same(got.numpy(), np.maximum((x - m) * s + 0.5, 0), "per-channel rows")
    f = rng.standard_normal((1001, 64)).astype(np.float32)
    got = lt.evaluate(cuda(x) * cuda(f))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.numpy(), x * f)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_reductions_on_cuda(axis):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((513, 96)).astype(BF)
    x, f = cuda(a), _f64(a)
    for kind in ("sum", "mean"):
        assert_rounded_once(getattr(lt, kind)(x, axis=axis).numpy(), getattr(np, kind)(f, axis=axis),
                            np.sum(np.abs(f), axis=axis), kind)
    for kind in ("max", "min"):
        np.testing.assert_array_equal(_f64(getattr(lt, kind)(x, axis=axis).numpy()), getattr(np, kind)(f, axis=axis))
    assert_rounded_once(lt.var(x, axis=axis).numpy(), np.var(f, axis=axis), np.mean(f * f, axis=axis) * f.size, "var")
    # float32 accumulation rounded once: 5000 lies between the bfloat16 neighbours 4992 and 5024
    # (NumPy's bfloat16 accumulator would stop at 256)
    assert float(cuda(np.ones(5000, BF)).sum()) == float(np.float32(5000).astype(BF)) == 4992.0


@pytest.mark.parametrize("shapes", [((128, 256), (256, 64)), ((3, 64, 40), (40, 24)), ((256,), (256, 8))])
def test_matmul_through_cublas(shapes):
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal(s).astype(BF) for s in shapes)
    expr = cuda(a) @ cuda(b)
    assert expr.dtype == BF
    if len(shapes[0]) > 1:
        assert "cuBLAS" in lt.explain(expr)
    got = lt.evaluate(expr).numpy()
    assert_rounded_once(got, np.matmul(_f64(a), _f64(b)), np.matmul(np.abs(_f64(a)), np.abs(_f64(b))), "matmul")


def test_pooling_on_cuda():
    rng = np.random.default_rng(5)
    z = rng.standard_normal((2, 8, 8, 16)).astype(BF)
    got = lt.max_pool2d(cuda(z), 2).numpy()
    want = _f64(z).reshape(2, 4, 2, 4, 2, 16).max(axis=(2, 4))
    np.testing.assert_array_equal(_f64(got), want)
    avg = lt.avg_pool2d(cuda(z), 2).numpy()
    assert_rounded_once(avg, _f64(z).reshape(2, 4, 2, 4, 2, 16).mean(axis=(2, 4)), err_msg="avg_pool2d")
