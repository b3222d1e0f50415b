"""lazytensor's cuBLAS GEMM on the GPU (kernels/cuda/cublas_gemm.py): every case it takes against NumPy
(float64) and cupy.matmul, a plan's matmuls captured into a CUDA graph and replayed, and several
results (an MLP training step) replayed as one graph."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.reuse import several_recipes

needs_cuda = pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")
pytestmark = [pytest.mark.gpu, needs_cuda]
TOL = {np.float16: 2e-2, np.float32: 1e-4, np.float64: 1e-12}


def _matrix(cp, rng, batch, rows, cols, layout, dtype):
    if layout == "row":
        return cp.asarray(rng.standard_normal((*batch, rows, cols)).astype(dtype))
    if layout == "col":
        return cp.swapaxes(cp.asarray(rng.standard_normal((*batch, cols, rows)).astype(dtype)), -1, -2)
    return cp.asarray(rng.standard_normal((*batch, rows, cols + 3)).astype(dtype))[..., :cols]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("a_layout, b_layout, out_layout", [("row", "row", "row"), ("col", "row", "row"),
                                                            ("row", "col", "row"), ("col", "col", "col"),
                                                            ("padded", "padded", "padded"), ("row", "col", "col")])
@pytest.mark.parametrize("batch, broadcast", [((), None), ((3,), None), ((2, 3), "a"), ((3,), "b")])
def test_each_case_against_numpy_and_cupy_matmul(dtype, a_layout, b_layout, out_layout, batch, broadcast):
    import cupy as cp
    from lazytensor.kernels.cuda.cublas_gemm import arguments_for, run_gemm
    rng = np.random.default_rng(0)
    m, k, n = 37, 70, 19
    a = _matrix(cp, rng, () if broadcast == "a" else batch, m, k, a_layout, dtype)
    b = _matrix(cp, rng, () if broadcast == "b" else batch, k, n, b_layout, dtype)
    out = _matrix(cp, rng, batch, m, n, out_layout, dtype)
    args, why = arguments_for(a, b, out)
    if args is None:
        assert len(batch) > 1 and "padded" in (a_layout, b_layout, out_layout), why
        return
    run_gemm(args, a, b, out)
    want = np.matmul(cp.asnumpy(a).astype(np.float64), cp.asnumpy(b).astype(np.float64))
    np.testing.assert_allclose(cp.asnumpy(out).astype(np.float64), want, rtol=TOL[dtype], atol=TOL[dtype] * 8)
    np.testing.assert_allclose(cp.asnumpy(out), cp.asnumpy(cp.matmul(a, b)), rtol=TOL[dtype], atol=TOL[dtype] * 8)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_a_plan_with_matmuls_is_captured_and_replayed(dtype):
    rng = np.random.default_rng(1)
    x = lt.asarray(rng.standard_normal((64, 48)).astype(dtype), device="cuda")
    w = lt.asarray(rng.standard_normal((32, 48)).astype(dtype), device="cuda")
    b = lt.asarray(rng.standard_normal(32).astype(dtype), device="cuda")
    y = lt.empty((64, 32), dtype, "cuda")
    text = str(lt.explain(lt.relu(x @ w.T + b), out=y, source=False))
    assert ("cuBLAS GEMM" in text or "cuBLASLt GEMM" in text) and "capturable" in text, text   # (the epilogue's, where chosen)
    with lt.profile() as p:
        for i in range(5):
            x_np = rng.standard_normal((64, 48)).astype(dtype)
            x.data[...] = lt.asarray(x_np, device="cuda").data
            y[...] = lt.relu(x @ w.T + b)
            want = np.maximum(x_np.astype(np.float64) @ w.numpy().T.astype(np.float64) + b.numpy(), 0)
            np.testing.assert_allclose(y.numpy().astype(np.float64), want, rtol=TOL[dtype], atol=TOL[dtype] * 8)
    assert any(k.kind == "graph" for k in p.kernels), [k.kind for k in p.kernels]


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_an_mlp_step_is_planned_once_and_replayed_as_a_graph(dtype):
    rng = np.random.default_rng(2)
    x = lt.asarray(rng.standard_normal((96, 40)).astype(dtype), device="cuda")
    labels = lt.asarray(rng.integers(0, 10, 96), device="cuda")
    layers = [lt.nn.Linear(i, o, dtype=dtype, device="cuda", rng=rng) for i, o in ((40, 64), (64, 64), (64, 10))]
    params = [p for layer in layers for p in layer.parameters()]
    opt = lt.nn.SGD(params, lr=0.01)
    ref = [p.numpy().astype(np.float32) for p in params]

    def step():
        h = x
        for layer in layers[:-1]:
            h = lt.relu(layer(h))
        loss = lt.cross_entropy(layers[-1](h).astype(np.float32), labels)
        opt.step(lt.grad(loss, params))

    plans = []
    with lt.profile() as p:
        for _ in range(5):
            before = several_recipes.plans_made[0]
            step()
            plans.append(several_recipes.plans_made[0] - before)
    assert plans == [1, 0, 0, 0, 0]
    assert any(k.kind == "graph" for k in p.kernels), [k.kind for k in p.kernels]
    assert all(np.isfinite(q.numpy()).all() for q in params)
    assert any(not np.array_equal(q.numpy().astype(np.float32), r) for q, r in zip(params, ref))
