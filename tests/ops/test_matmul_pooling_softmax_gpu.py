"""matmul, pooling and the softmax family on CUDA against NumPy and the loop oracles: the same checks
as the CPU tests (ops/test_matmul.py, ops/test_pooling.py, ops/test_softmax.py). Skipped without CuPy and a GPU."""
from __future__ import annotations

import numpy as np
import pytest

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402
from lazytensor.autodiff.rules import GRADIENTS  # noqa: E402
from lazytensor.ops.pooling import pool_backward  # noqa: E402
from tests.support.oracles import pool_backward_reference, pool_reference  # noqa: E402

TOL = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-12}


def cuda(x):
    return lt.asarray(x, device="cuda")


@pytest.mark.parametrize("a_shape,b_shape", [((5, 7), (7, 3)), ((7,), (7, 3)), ((5, 7), (7,)), ((7,), (7,)),
                                             ((2, 1, 5, 7), (3, 7, 4)), ((4, 0), (0, 3)), ((1, 65, 130), (130, 33))])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32"])
def test_matmul_on_cuda_matches_numpy(a_shape, b_shape, dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(a_shape) * 3).astype(dtype)
    b = (rng.standard_normal(b_shape) * 3).astype(dtype)
    ours = np.asarray(cuda(a) @ cuda(b))
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert ours.dtype == np.matmul(a, b).dtype and ours.shape == want.shape
    if dtype == "int32":
        np.testing.assert_array_equal(ours, np.matmul(a, b))
    else:     # cuBLAS sums in its own order (float16: in float32)
        scale = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
        eps = float(np.finfo(dtype).eps)
        assert np.all(np.abs(ours - want) <= 4 * eps * (scale + np.abs(want)) + 1e-30)


def test_matmul_bool_on_cuda():
    rng = np.random.default_rng(1)
    a, b = rng.random((4, 5)) < 0.3, rng.random((5, 2)) < 0.3
    np.testing.assert_array_equal(np.asarray(cuda(a) @ cuda(b)), a @ b)


@pytest.mark.parametrize("mode", ["off", "on"])
def test_relu_affine_on_cuda_is_matmul_then_one_kernel_and_strided_operands(mode):
    """With the cuBLASLt epilogue off: the GEMM, then one kernel; on: one GEMM (lazytensor.plan.heavy.matmul_epilogue)."""
    from lazytensor.assign.plans import set_matmul_epilogue_mode
    from lazytensor.plan.heavy import matmul_epilogue
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((64, 32), (16, 32), (16,)))
    set_matmul_epilogue_mode(mode)
    try:
        e = lt.relu(cuda(x) @ cuda(w).T + cuda(b))
        steps = [type(s).__name__ for s in lt.explain(e).steps]
        text = str(lt.explain(e, source=False))
        with lt.profile() as p:
            out = lt.evaluate(e)
            np.asarray(out)
    finally:
        set_matmul_epilogue_mode(matmul_epilogue.DEFAULT_MODE)
    if mode == "off":
        assert steps == ["MatmulStep", "FusedElementwise"]
        assert "cuBLAS GEMM (b: a transposed view (op flag, no copy); no allocation: capturable)" in text
        assert [k.kind for k in p.kernels] == ["matmul", "elementwise"]
    else:
        assert steps == ["MatmulStep"] and "RELU_BIAS epilogue" in text, text
        assert [k.kind for k in p.kernels] == ["matmul"]
    np.testing.assert_allclose(np.asarray(out), np.maximum(x @ w.T + b, 0), rtol=1e-4, atol=1e-4)
    y = lt.zeros((16, 64), device="cuda")
    y.T[...] = cuda(x) @ cuda(w).T                  # a transposed destination: cuBLAS writes it (C^T = B^T A^T)
    np.testing.assert_allclose(np.asarray(y), (x @ w.T).T, rtol=1e-4, atol=1e-4)


def test_matmul_rule_on_cuda():
    rng = np.random.default_rng(3)
    a, b, g = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((2, 3, 5))
    da, db = GRADIENTS["matmul"](lt.matmul(cuda(a), cuda(b)), cuda(g))
    np.testing.assert_allclose(np.asarray(da), g @ b.T, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(db), np.einsum("bik,bij->kj", a, g), rtol=1e-12)


GEOMETRIES = [((2, 7, 6, 3), (3, 3), (2, 2), (1, 1)), ((1, 5, 5, 4), (2, 2), (2, 2), (0, 0)),
              ((2, 6, 9, 5), (3, 2), (1, 3), (1, 1)), ((1, 4, 4, 8), (1, 1), (1, 1), (0, 0)),
              # windows apart (the per-window backward): tiling, gaps, padding, a cut last row
              ((2, 8, 8, 16), (2, 2), (2, 2), (0, 0)), ((1, 7, 7, 3), (2, 2), (3, 3), (0, 0)),
              ((1, 5, 5, 2), (2, 2), (2, 2), (1, 1)), ((2, 5, 7, 3), (2, 3), (2, 3), (0, 0))]


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_pooling_on_cuda_matches_reference(geometry, kind, dtype):
    shape, kernel, stride, padding = geometry
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape)
    flat = x.reshape(-1)
    flat[rng.random(flat.size) < 0.2] = 0.5
    flat[rng.random(flat.size) < 0.1] = -np.inf
    flat[rng.random(flat.size) < 0.05] = np.nan
    x = x.astype(dtype)
    pool = lt.max_pool2d if kind == "max" else lt.avg_pool2d
    node = pool(cuda(x), kernel, stride, padding)
    ours = np.asarray(node).astype(np.float64)
    tol = TOL[x.dtype]
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(ours, pool_reference(kind, x.astype(np.float64), kernel, stride, padding),
                                   rtol=tol, atol=tol)
    g = rng.standard_normal(node.shape).astype(dtype)
    dx = np.asarray(pool_backward(node, cuda(g))).astype(np.float64)
    want = pool_backward_reference(kind, x.astype(np.float64), g.astype(np.float64), kernel, stride, padding)
    np.testing.assert_allclose(dx, want, rtol=4 * tol, atol=4 * tol)


def test_pooling_of_a_strided_operand_on_cuda():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 8, 6, 3)).astype(np.float32)
    y = lt.max_pool2d(cuda(x)[:, ::-1, 1:], 2)
    steps = [type(s).__name__ for s in lt.explain(y).steps]
    assert steps == ["FusedElementwise", "PoolStep"]          # the dense copy, then the kernel
    np.testing.assert_allclose(np.asarray(y), pool_reference("max", x[:, ::-1, 1:], (2, 2), (2, 2), (0, 0)), rtol=1e-6)


def test_softmax_family_and_cross_entropy_on_cuda():
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((9, 13)) * 4).astype(np.float32)
    x[2] = -np.inf
    labels = rng.integers(0, 13, size=9)
    t = cuda(x)
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.where(np.isfinite(x64.max(1, keepdims=True)), x64.max(1, keepdims=True), 0)
        lse = np.log(np.exp(x64 - m).sum(1, keepdims=True)) + m
        np.testing.assert_allclose(np.asarray(lt.logsumexp(t)), lse[:, 0], rtol=1e-6)
        np.testing.assert_allclose(np.asarray(lt.log_softmax(t)), x64 - lse, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(lt.softmax(t)), np.exp(x64 - m) / np.exp(x64 - m).sum(1, keepdims=True),
                                   rtol=1e-5, atol=1e-7)
    x[2] = 0
    x64 = x.astype(np.float64)
    lse = np.log(np.exp(x64).sum(1))
    want = np.mean(lse - x64[np.arange(9), labels])
    np.testing.assert_allclose(float(lt.cross_entropy(cuda(x), cuda(labels))), want, rtol=1e-5)
