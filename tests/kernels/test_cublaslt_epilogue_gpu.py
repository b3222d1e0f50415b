"""cuBLASLt's bias and bias+ReLU epilogues (kernels/cuda/cublaslt_gemm.py) on the GPU against NumPy (float64
products, rounded once to the dtype), for the layouts a Linear layer gives (x @ w.T, x @ w), in float16
and float32; NaN, inf and signed zeros through the ReLU epilogue; and a call captured into a graph."""
import numpy as np
import pytest

import lazytensor as lt

needs_cuda = pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")
pytestmark = [pytest.mark.gpu, needs_cuda]
TOL = {np.float16: 2e-2, np.float32: 1e-4}


def _operands(cp, rng, m, k, n, dtype, transposed_w=True):
    x = cp.asarray(rng.standard_normal((m, k)).astype(dtype))
    w = cp.asarray(rng.standard_normal((n, k)).astype(dtype))
    b = cp.asarray(rng.standard_normal(n).astype(dtype))
    return x, (w.T if transposed_w else cp.ascontiguousarray(w.T)), b


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("epilogue", ["relu_bias", "bias"])
@pytest.mark.parametrize("transposed_w", [True, False])
@pytest.mark.parametrize("m, k, n", [(64, 48, 32), (37, 70, 19), (256, 784, 512)])
def test_epilogue_against_numpy(dtype, epilogue, transposed_w, m, k, n):
    import cupy as cp
    from lazytensor.kernels.cuda.cublas_gemm import arguments_for
    from lazytensor.kernels.cuda.cublaslt_gemm import epilogue_refusal, run_epilogue_gemm
    rng = np.random.default_rng(m + n)
    x, wt, b = _operands(cp, rng, m, k, n, dtype, transposed_w)
    out = cp.empty((m, n), dtype)
    args, why = arguments_for(x, wt, out)
    assert args is not None, why
    assert epilogue_refusal(args, b.shape, b.strides, b.dtype, out.dtype) is None
    run_epilogue_gemm(args, x, wt, b, out, epilogue)
    want = cp.asnumpy(x).astype(np.float64) @ cp.asnumpy(wt).astype(np.float64) + cp.asnumpy(b)
    if epilogue == "relu_bias":
        want = np.maximum(want, 0)
    np.testing.assert_allclose(cp.asnumpy(out).astype(np.float64), want, rtol=TOL[dtype], atol=TOL[dtype] * 8)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_relu_epilogue_on_nan_inf_and_signed_zeros(dtype):
    """What cuBLASLt's ReLU gives for NaN, inf and -0.0 (NumPy: relu(NaN) is NaN): printed, and the
    planner's choice relies on it (lazytensor.plan.heavy.matmul_epilogue)."""
    import cupy as cp
    from lazytensor.kernels.cuda.cublas_gemm import arguments_for
    from lazytensor.kernels.cuda.cublaslt_gemm import run_epilogue_gemm
    m, k, n = 16, 8, 16
    x = cp.zeros((m, k), dtype)
    wt = cp.zeros((k, n), dtype)
    b = cp.asarray(np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0] + [2.0] * (n - 7), dtype))
    out = cp.empty((m, n), dtype)
    args, _ = arguments_for(x, wt, out)
    run_epilogue_gemm(args, x, wt, b, out, "relu_bias")
    row = cp.asnumpy(out)[0]
    print("cuBLASLt relu_bias of [nan, inf, -inf, -0.0, 0.0, 1, -1]:", row[:7], "signbits", np.signbit(row[:7]))
    want = np.maximum(np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0]), 0)
    assert np.isnan(row[0]), f"cuBLASLt's ReLU maps NaN to {row[0]}"
    np.testing.assert_array_equal(row[1:7], want[1:])


def test_an_epilogue_gemm_is_captured_into_a_graph():
    import cupy as cp
    from lazytensor.kernels.cuda.cublas_gemm import arguments_for
    from lazytensor.kernels.cuda.cublaslt_gemm import run_epilogue_gemm
    rng = np.random.default_rng(5)
    x, wt, b = _operands(cp, rng, 128, 64, 96, np.float32)
    out = cp.empty((128, 96), np.float32)
    args, _ = arguments_for(x, wt, out)
    run_epilogue_gemm(args, x, wt, b, out)          # the heuristic is asked outside the capture
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        run_epilogue_gemm(args, x, wt, b, out)
        graph = stream.end_capture()
    out[...] = 0
    x[...] = cp.asarray(rng.standard_normal((128, 64)).astype(np.float32))
    graph.launch(stream)
    stream.synchronize()
    want = np.maximum(cp.asnumpy(x).astype(np.float64) @ cp.asnumpy(wt) + cp.asnumpy(b), 0)
    np.testing.assert_allclose(cp.asnumpy(out), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("transposed_out", [True, False])
@pytest.mark.parametrize("m, k, n", [(64, 256, 32), (37, 70, 19), (784, 2048, 512)])
def test_bias_gradient_epilogue_against_numpy(dtype, transposed_out, m, k, n):
    """dW = x.T @ g and db = g.sum(axis=0) (a Linear layer's weight and bias gradients, k the batch),
    by one GEMM with BGRADA (row-major dW) or BGRADB (dW written transposed, as the planner does)."""
    import cupy as cp
    from lazytensor.kernels.cuda.cublas_gemm import arguments_for
    from lazytensor.kernels.cuda.cublaslt_gemm import bgrad_kind, bgrad_refusal, run_epilogue_gemm
    rng = np.random.default_rng(m + k)
    x = cp.asarray(rng.standard_normal((k, m)).astype(dtype))
    g = cp.asarray(rng.standard_normal((k, n)).astype(dtype))
    out = cp.empty((n, m), dtype).T if transposed_out else cp.empty((m, n), dtype)
    total = cp.full(n, np.nan, dtype)
    args, why = arguments_for(x.T, g, out)
    assert args is not None, why
    assert bgrad_refusal(args, total.shape, total.strides, total.dtype, out.dtype) is None
    run_epilogue_gemm(args, x.T, g, total, out, bgrad_kind(args))
    x64, g64 = cp.asnumpy(x).astype(np.float64), cp.asnumpy(g).astype(np.float64)
    tol = TOL[dtype] * (4 if dtype == np.float16 else 1)
    np.testing.assert_allclose(cp.asnumpy(out).astype(np.float64), x64.T @ g64, rtol=tol, atol=tol * 8 * np.sqrt(k))
    np.testing.assert_allclose(cp.asnumpy(total).astype(np.float64), g64.sum(axis=0), rtol=tol, atol=tol * 8 * np.sqrt(k))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_a_linear_layers_gradients_with_the_epilogues_on(dtype):
    """lt.grad of relu(x @ w.T + b) evaluated with the epilogues forced on (the forward by RELU_BIAS,
    the bias gradient by BGRAD) against NumPy in float64."""
    from lazytensor.assign.plans import set_matmul_epilogue_mode
    from lazytensor.plan.heavy import matmul_epilogue
    rng = np.random.default_rng(9)
    x, w, b, w2 = (rng.standard_normal(s).astype(dtype) for s in ((512, 96), (128, 96), (128,), (10, 128)))
    tx, tw, tb, tw2 = (lt.asarray(v, device="cuda") for v in (x, w, b, w2))
    set_matmul_epilogue_mode("on")
    try:
        h = lt.relu(tx @ tw.T + tb)
        loss = (h @ tw2.T).astype(np.float32).sum()
        grads = lt.grad(loss, [tw, tb])
        text = str(lt.explain(list(grads), source=False))
        gw, gb = (g.numpy().astype(np.float64) for g in lt.evaluate(*grads))
    finally:
        set_matmul_epilogue_mode(matmul_epilogue.DEFAULT_MODE)
    assert "RELU_BIAS epilogue" in text and ("BGRADB epilogue" in text or "BGRADA epilogue" in text), text
    x64, w64, b64, w264 = (v.astype(np.float64) for v in (x, w, b, w2))
    z = x64 @ w64.T + b64
    dz = np.ones((512, 10)) @ w264 * (z > 0)
    tol = 3e-2 if dtype == np.float16 else 1e-4
    np.testing.assert_allclose(gw, dz.T @ x64, rtol=tol, atol=tol * 30)
    np.testing.assert_allclose(gb, dz.sum(axis=0), rtol=tol, atol=tol * 30)
