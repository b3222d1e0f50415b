"""relu(x @ w.T + b) as one cuBLASLt GEMM with the RELU_BIAS epilogue (lazytensor.plan.heavy.matmul_epilogue,
kernels/cuda/cublaslt_gemm.py), checked on the CPU: the GEMM's arguments and bias read as cuBLASLt reads them
(a NumPy emulation of its column-major GEMM and row-wise bias) give NumPy's result; the sites the
planner finds (and those it must not take: a product or pre-activation something else reads); plans
made with the epilogue (on a CPU backend standing in for CUDA, the GEMM emulated) equal NumPy and the
plain plan over several training steps, with one kernel fewer per layer; lt.explain shows the choice."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.kernels.cuda.cublas_gemm import arguments_for
from lazytensor.kernels.cuda.cublaslt_gemm import bgrad_kind, bgrad_refusal, epilogue_refusal
from lazytensor.assign.plans import set_matmul_epilogue_mode
from lazytensor.plan.heavy import matmul_epilogue, matmul as matmul_plan

from lazytensor.reuse import recipes
from tests.kernels.test_cublas_gemm import _col_major, emulate


def emulate_epilogue(args, a, b, bias, out, epilogue="relu_bias"):
    """cuBLASLt's D = epilogue(op(A') op(B') + bias), the bias indexed by D's (column-major) row; or
    D = op(A') op(B') and bias = the sum over k of op(A') (BGRADA: one per row of D) or of op(B')
    (BGRADB: one per column), reading the operands' memory as cuBLAS does."""
    emulate(args, a, b, out)
    if epilogue in ("bgrada", "bgradb"):
        x, y = (a, b) if args.first == "a" else (b, a)
        if epilogue == "bgrada":
            rows = (args.m, args.k) if args.transa == 0 else (args.k, args.m)
            A = _col_major(x, *rows, args.lda, 0, 1)[0]
            bias[...] = (A if args.transa == 0 else A.T).sum(axis=1)
        else:
            rows = (args.k, args.n) if args.transb == 0 else (args.n, args.k)
            B = _col_major(y, *rows, args.ldb, 0, 1)[0]
            bias[...] = (B if args.transb == 0 else B.T).sum(axis=0)
        return
    d = _col_major(out, args.m, args.n, args.ldc, 0, 1)[0]
    d += np.asarray(bias)[:, None]
    if epilogue == "relu_bias":
        np.maximum(d, 0, out=d)


def _layer(rng, m, k, n, dtype, transposed):
    x = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((n, k)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    return x, (w.T if transposed else np.ascontiguousarray(w.T)), b


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 6), k=st.integers(1, 6), n=st.integers(1, 6), transposed=st.booleans(),
       epilogue=st.sampled_from(["relu_bias", "bias"]), seed=st.integers(0, 99))
def test_the_arguments_and_bias_give_numpy(m, k, n, transposed, epilogue, seed):
    x, wt, b = _layer(np.random.default_rng(seed), m, k, n, np.float32, transposed)
    out = np.full((m, n), np.nan, np.float32)
    args, why = arguments_for(x, wt, out)
    assert why is None and epilogue_refusal(args, b.shape, b.strides, b.dtype, out.dtype) is None
    emulate_epilogue(args, x, wt, b, out, epilogue)
    want = x.astype(np.float64) @ wt.astype(np.float64) + b
    np.testing.assert_allclose(out, np.maximum(want, 0) if epilogue == "relu_bias" else want, rtol=1e-5, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 6), k=st.integers(1, 6), n=st.integers(1, 6), transposed_out=st.booleans(),
       transposed_a=st.booleans(), seed=st.integers(0, 99))
def test_the_bias_gradient_arguments_give_numpy(m, k, n, transposed_out, transposed_a, seed):
    """out = a @ g and g.sum(axis=0), the weight and bias gradients of a Linear layer (a = x.T, the
    weight gradient written row-major or transposed, as the planner computes it)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m)).T if transposed_a else rng.standard_normal((m, k))
    g = rng.standard_normal((k, n))
    out = np.empty((n, m)).T if transposed_out else np.empty((m, n))
    total = np.full(n, np.nan)
    args, why = arguments_for(a, g, out)
    assert why is None
    assert bgrad_kind(args) == ("bgrada" if args.first == "b" else "bgradb")
    assert bgrad_refusal(args, total.shape, total.strides, np.float64, np.float64) == \
        "float64 data with a float64 sum (the epilogue is used for float16 and float32)"
    f32 = total.astype(np.float32)
    assert bgrad_refusal(args, f32.shape, f32.strides, f32.dtype, f32.dtype) is None
    emulate_epilogue(args, a, g, total, out, bgrad_kind(args))
    np.testing.assert_allclose(out, a @ g, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(total, g.sum(axis=0), rtol=1e-12, atol=1e-12)


def test_a_vector_of_the_wrong_length_is_refused_before_cublaslt_runs():
    from lazytensor.kernels.cuda.cublaslt_gemm import run_epilogue_gemm
    a, g = np.ones((8, 5), np.float32).T, np.ones((8, 3), np.float32)
    out = np.empty((3, 5), np.float32).T                 # written transposed: BGRADB sums g, 3 of them
    args, _ = arguments_for(a, g, out)
    with pytest.raises(ValueError, match="a vector of 3 elements"):
        run_epilogue_gemm(args, a, g, np.zeros(5, np.float32), out, "bgradb")


def test_refusals_say_why():
    rng = np.random.default_rng(0)
    x, wt, b = _layer(rng, 4, 3, 5, np.float32, True)
    args, _ = arguments_for(x, wt, np.empty((4, 5), np.float32))
    assert "bias" in epilogue_refusal(args, (4,), (4,), np.float32, np.float32)
    assert "float64" in epilogue_refusal(args, (5,), (8,), np.float64, np.float64)
    assert "contiguous" in epilogue_refusal(args, (5,), (8,), np.float32, np.float32)
    transposed_out, _ = arguments_for(x, wt, np.empty((5, 4), np.float32).T)
    assert "transposed" in epilogue_refusal(transposed_out, (5,), (4,), np.float32, np.float32)
    batched, _ = arguments_for(np.ones((2, 4, 3), np.float32), wt, np.empty((2, 4, 5), np.float32))
    assert "batched" in epilogue_refusal(batched, (5,), (4,), np.float32, np.float32)
    assert "contiguous row" in bgrad_refusal(args, (4,), (4,), np.float32, np.float32)
    assert "float64" in bgrad_refusal(args, (5,), (8,), np.float64, np.float64)


def _relu_sites(roots):
    return matmul_epilogue.epilogue_sites(roots)[0]


def test_sites_are_relus_over_a_product_plus_bias_that_nothing_else_reads():
    rng = np.random.default_rng(1)
    x, w, b = (lt.asarray(v) for v in (rng.standard_normal((6, 4)), rng.standard_normal((3, 4)), rng.standard_normal(3)))
    z = x @ w.T + b
    h = lt.relu(z)
    assert list(_relu_sites([h]).values()) == [(h, b)]
    assert list(_relu_sites([lt.relu(b + x @ w.T)]).values())[0][1] is b
    assert _relu_sites([h, z]) == {}               # the pre-activation is a result too
    assert _relu_sites([h, z * 2.0]) == {}         # ... or read by another expression
    product = x @ w.T
    assert _relu_sites([lt.relu(product + b), product.sum()]) == {}   # the product is read
    assert _relu_sites([lt.relu(x @ w.T + 1.0)]) == {}               # no bias row
    assert _relu_sites([lt.relu(x @ w.T + lt.asarray(np.ones((6, 3))))]) == {}
    # the gradient of a relu reads the activation: a training step keeps the site
    loss = (lt.relu(x @ w.T + b) * 3.0).sum()
    gw, gb = lt.grad(loss, [w, b])
    assert len(_relu_sites([loss, gw, gb])) == 1


def test_bias_gradient_sites_pair_a_weight_gradient_with_the_sum_of_its_operand():
    rng = np.random.default_rng(2)
    x, w, b = (lt.asarray(v) for v in (rng.standard_normal((6, 4)), rng.standard_normal((3, 4)), rng.standard_normal(3)))
    loss = (lt.tanh(x @ w.T + b) * 3.0).sum()
    gw, gb = lt.grad(loss, [w, b])
    [total] = matmul_epilogue.epilogue_sites([gw, gb])[1].values()
    assert total is gb
    assert matmul_epilogue.epilogue_sites([gw])[1] == {}                  # no bias gradient asked for
    g = lt.tanh(x @ w.T)
    assert len(matmul_epilogue.epilogue_sites([x.T @ g, g.sum(axis=0)])[1]) == 1
    assert matmul_epilogue.epilogue_sites([x.T @ g, g.sum(axis=1)])[1] == {}   # not over the GEMM's k
    assert matmul_epilogue.epilogue_sites([x.T @ g, g.mean(axis=0)])[1] == {}
    assert matmul_epilogue.epilogue_sites([g.T @ x, g.sum(axis=0)])[1] == {}   # g is not the summed operand


@pytest.fixture
def emulated_epilogue(monkeypatch):
    """The CPU backend standing in for CUDA: sites are planned, the epilogue GEMM emulated."""
    calls = []

    def run(args, a, b, bias, out, epilogue="relu_bias"):
        calls.append(args)
        emulate_epilogue(args, a, b, bias, out, epilogue)
    monkeypatch.setattr(matmul_epilogue, "available", lambda backend: True)
    monkeypatch.setattr(matmul_plan, "run_epilogue_gemm", run)
    monkeypatch.setattr(matmul_epilogue, "MODE", "on")      # undone after the test, as set_matmul_epilogue_mode would set it
    from lazytensor.plan import planner, several
    monkeypatch.setattr(planner, "available", lambda backend: True)
    monkeypatch.setattr(several, "available", lambda backend: True)
    monkeypatch.setattr(matmul_epilogue._CHOICES, "memory", {})        # choices of this test only,
    monkeypatch.setattr(matmul_epilogue._CHOICES.disk, "get", lambda key: None)   # none from or to the disk
    monkeypatch.setattr(matmul_epilogue._CHOICES.disk, "put", lambda key, value: None)
    recipes.clear()                 # plans kept from other tests were made without sites
    yield calls
    recipes.clear()


def _mlp(seed, dtype):
    rng = np.random.default_rng(seed)
    return lt.nn.Sequential(lt.nn.Linear(12, 16, dtype=dtype, rng=rng), lt.nn.ReLU(), lt.nn.Linear(16, 16, dtype=dtype, rng=rng),
                            lt.nn.ReLU(), lt.nn.Linear(16, 5, dtype=dtype, rng=rng))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_linear_relu_is_one_step_equal_to_numpy(emulated_epilogue, dtype):
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(s).astype(dtype) for s in ((9, 7), (5, 7), (5,)))
    tx, tw, tb = (lt.asarray(v) for v in (x, w, b))
    y = lt.empty((9, 5), dtype)
    text = str(lt.explain(lt.relu(tx @ tw.T + tb), out=y, source=False))
    if dtype == np.float64:
        assert "no cuBLASLt epilogue for relu(a @ b + bias): cuBLASLt does not take it" in text, text
        assert "plan: 2 steps" in text, text
    else:
        assert "plan: 1 step" in text and "RELU_BIAS epilogue" in text, text
    y[...] = lt.relu(tx @ tw.T + tb)
    np.testing.assert_allclose(y.numpy(), np.maximum(x @ w.T + b, 0), rtol=1e-5, atol=1e-5)
    assert len(emulated_epilogue) == (dtype == np.float32)


def test_training_steps_with_the_epilogue_equal_the_plain_plan(emulated_epilogue, monkeypatch):
    """Four train_step calls: with the epilogues (each Linear+ReLU one GEMM, no forward relu kernel;
    each bias gradient written by its weight gradient's GEMM, no reduction step) and without, the same
    losses and weights."""
    rng = np.random.default_rng(3)
    data = [(rng.standard_normal((8, 12)).astype(np.float32), rng.integers(0, 5, 8))] * 4   # the loss falls
    results = {}
    for mode in ("on", "off"):
        set_matmul_epilogue_mode(mode)
        model = _mlp(4, np.float32)
        step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
        losses = [float(step(lt.asarray(x), lt.asarray(y)).numpy()) for x, y in data]
        text = lt.explain(step, source=False, detail=True)
        results[mode] = losses, [p.numpy() for p in model.parameters()], text
    on, off = results["on"], results["off"]
    assert on[2].count("RELU_BIAS epilogue") == 2, on[2]
    assert on[2].count("BGRADB epilogue") + on[2].count("BGRADA epilogue") == 3, on[2]
    assert off[2].count("LAZYTENSOR_MATMUL_EPILOGUE=off") == 5, off[2]
    n_on = sum(line.startswith("[") for line in on[2].splitlines())
    n_off = sum(line.startswith("[") for line in off[2].splitlines())
    assert n_on == n_off - 5, (n_on, n_off)
    np.testing.assert_allclose(on[0], off[0], rtol=1e-5)
    assert on[0][-1] < on[0][0]
    for a, b in zip(on[1], off[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert len(emulated_epilogue) == 5 * 4            # two relus and three bias gradients, four calls


@pytest.mark.parametrize("faster", [matmul_epilogue.EPILOGUE, matmul_epilogue.KERNEL])
def test_the_measured_way_runs_and_explain_shows_the_times(emulated_epilogue, monkeypatch, faster):
    timed = []

    def measure(run_kernel, run_epilogue, check):
        run_kernel(), run_epilogue()            # both ways run (on operands and outputs of their own)
        assert check() is None                  # and agree
        timed.append(faster)
        return faster, "measured: GEMM + kernel 1.000 ms, epilogue 0.900 ms", False
    set_matmul_epilogue_mode("measure")
    monkeypatch.setattr(matmul_epilogue, "_measure", measure)
    monkeypatch.setattr(matmul_epilogue, "_key", lambda gemm, out, kind: f"test|{faster}|{kind}|{tuple(gemm)}")
    rng = np.random.default_rng(6)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((9, 7), (5, 7), (5,)))
    tx, tw, tb = (lt.asarray(v) for v in (x, w, b))
    y = lt.full((9, 5), 7.0, np.float32)
    text = str(lt.explain(lt.relu(tx @ tw.T + tb), out=y, source=False))
    assert (y.numpy() == 7.0).all()                 # timing while planning left the destination alone
    assert "measured: GEMM + kernel 1.000 ms, epilogue 0.900 ms" in text, text
    if faster == matmul_epilogue.EPILOGUE:
        assert "plan: 1 step" in text and "RELU_BIAS epilogue" in text, text
    else:
        assert "plan: 2 steps" in text and "no cuBLASLt epilogue for relu(a @ b + bias): cuBLAS GEMM + the fused kernel" in text, text
    y[...] = lt.relu(tx @ tw.T + tb)
    np.testing.assert_allclose(y.numpy(), np.maximum(x @ w.T + b, 0), rtol=1e-5, atol=1e-5)
    assert len(timed) == 1


@pytest.mark.parametrize("broken", [False, True])
def test_trials_run_the_plans_layouts_and_a_wrong_epilogue_is_not_taken(emulated_epilogue, monkeypatch, broken):
    """The timed trials run both ways on random operands of the plan's layouts (a weight gradient
    written transposed stays so: BGRADB, as in the plan) and compare their results: an epilogue that
    gives other numbers (here an emulation summing the wrong operand) is not taken, whatever its time."""
    from lazytensor.kernels import timing
    times = iter([1.0, 0.5] * 20)               # the kernel way, then the epilogue: the epilogue is faster
    monkeypatch.setattr(timing, "burst_ms", lambda fn, **kw: (fn(), next(times))[1])
    monkeypatch.setattr(matmul_epilogue, "_key", lambda gemm, out, kind: f"test|{broken}|{kind}|{tuple(gemm)}")
    if broken:
        def wrong(args, a, b, bias, out, epilogue="relu_bias"):
            emulate_epilogue(args, a, b, bias, out, epilogue)
            if epilogue.startswith("bgrad"):
                bias[...] = np.asarray(b)[0]        # the first row, not the sum
        monkeypatch.setattr(matmul_plan, "run_epilogue_gemm", wrong)
    set_matmul_epilogue_mode("measure")
    rng = np.random.default_rng(7)
    x, w, b = (lt.asarray(rng.standard_normal(s).astype(np.float32)) for s in ((16, 12), (8, 12), (8,)))
    loss = (lt.tanh(x @ w.T + b) * 3.0).sum()
    gw, gb = lt.grad(loss, [w, b])
    text = str(lt.explain([gw, gb], source=False))
    if broken:
        assert "cuBLASLt's epilogue is not used: its result differed from the GEMM and kernel's" in text, text
        assert "a reduction step computes it" in text, text
    else:
        assert "BGRADB epilogue" in text and "the same numbers" in text, text
    got_w, got_b = (v.numpy() for v in lt.evaluate(gw, gb))
    x64, w64, b64 = (v.numpy().astype(np.float64) for v in (x, w, b))
    dz = 3.0 * (1 - np.tanh(x64 @ w64.T + b64) ** 2)
    np.testing.assert_allclose(got_w, dz.T @ x64, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_b, dz.sum(axis=0), rtol=1e-4, atol=1e-4)
