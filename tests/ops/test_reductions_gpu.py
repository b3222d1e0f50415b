"""Fused reductions on the CUDA backend against NumPy: every kind x dtype (the matrix and oracle of
tests/ops/test_reductions.py, run on the GPU), every loop shape at sizes that take the multi-block paths
(chunks and the combining kernel, vector tails, block- and warp-per-row), NaN, ties, empty reductions,
the meanvar statistics, bitwise determinism, and one kernel per fused reduction. Skipped where CuPy
or a CUDA device is missing."""
from __future__ import annotations

import numpy as np
import pytest

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402
from lazytensor.kernels.backend import backend_for  # noqa: E402
from lazytensor.kernels.ops import DTYPES  # noqa: E402
from lazytensor.kernels.program import Reduction, program_for  # noqa: E402
from lazytensor.plan.steps import FusedReduction  # noqa: E402
from tests.ops.test_reductions import (ARG_AXIS_FORMS, AXIS_FORMS, KINDS, SHAPE, _dtype_options, _values,  # noqa: E402
                             check)


F64 = np.dtype(np.float64)


def gpu_check(kind, x, axis, keepdims=False, dtype=None, ddof=0, form="method"):
    check(kind, x, axis, keepdims, dtype, ddof, form, t=lt.asarray(x, device="cuda"))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("kind", KINDS)
def test_kind_dtype_matrix(kind, dtype):
    """Every kind meets every dtype; the axis forms and dtype= rotate through the pairs."""
    ki, di = KINDS.index(kind), DTYPES.index(dtype)
    x = _values(dtype, SHAPE, np.random.default_rng(1000 * ki + di))
    forms = ARG_AXIS_FORMS if kind.startswith("arg") else AXIS_FORMS
    options = _dtype_options(kind, dtype)
    out = options[(3 * ki + di) % len(options)]
    ddof = (ki + di) % 3 if kind in ("var", "std") else 0
    for axis in forms[(ki + di) % len(forms)][:2]:
        for keepdims in (False, True):
            gpu_check(kind, x, axis, keepdims, out, ddof, form="method" if keepdims else "function")


# Shapes that take each loop shape's multi-block path (see kernels/cuda/reduce_layout.py).
LARGE = [
    ((1 << 20) + 3, None),          # full: block per chunk, partial states, vector tail
    ((3, 1 << 19), 1),              # rows: few long rows, a block per row and chunks
    ((3000, 37), 1),                # rows: a warp per row, odd rows: scalar loads
    ((20000, 64), 0),               # columns: vector loads, many chunks, a warp combines each output
    ((3000, 48), 0),                # columns: a few chunks, a thread combines each output
    ((64, 300, 48), 1),             # columns: two kept dimensions around the reduced one
    ((40, 50, 33), (0, 2)),         # strided reduced dimensions, odd kept extent
]


ROTATING = ("mean", "max", "min", "std", "prod", "any", "argmin")


@pytest.mark.parametrize("shape,axis", LARGE, ids=[f"{s}-{a}" for s, a in LARGE])
def test_large_float32_every_loop_shape(shape, axis):
    """sum, var and argmax on every shape; the other kinds rotate through the shapes."""
    i = LARGE.index((shape, axis))
    x = _values(np.float32, shape, np.random.default_rng(i))
    kinds = ["sum", "var", ROTATING[i % len(ROTATING)]]
    if not isinstance(axis, tuple):
        kinds.append("argmax")
    elif kinds[-1] == "argmin":
        kinds[-1] = "mean"
    for kind in kinds:
        gpu_check(kind, x if kind != "prod" else np.float32(1) + x / np.float32(1e4), axis)


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.bool_, np.float64], ids=lambda d: np.dtype(d).name)
def test_large_other_dtypes(dtype):
    kinds = ("sum", "mean", "max", "argmax", "var", "all")
    for j, (shape, axis) in enumerate((((1 << 20) + 3, None), ((20000, 64), 0), ((3000, 37), 1))):
        x = _values(dtype, shape, np.random.default_rng(7))
        for kind in (kinds[j], kinds[j + 3]):
            gpu_check(kind, x, axis)


def test_strided_and_broadcast_operands():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((513, 96)).astype(np.float32)
    m = rng.standard_normal((513, 1)).astype(np.float32)
    tx, tm = lt.asarray(x, device="cuda"), lt.asarray(m, device="cuda")
    for axis in (None, 0, 1):
        check("sum", x.T, axis, t=tx.T)
        check("var", x[::3, 1::2], axis, t=tx[::3, 1::2])
        check("mean", (x - m) * (x - m), axis, t=(tx - tm) * (tx - tm))
        check("argmax", x[::-1], None if axis is None else axis, t=tx[::-1])


def test_nan_deep_in_later_chunks():
    x = np.random.default_rng(5).standard_normal((1 << 20) + 9).astype(np.float32)
    x[[700001, 900000]] = np.nan
    t = lt.asarray(x, device="cuda")
    for kind in ("sum", "mean", "prod", "max", "min", "var", "std"):
        assert np.isnan(getattr(t, kind)().numpy()), kind
    assert t.argmax().numpy() == 700001 == np.argmax(x)
    assert t.argmin().numpy() == 700001 == np.argmin(x)
    m = x[: 4000 * 64].reshape(4000, 64).copy()
    m[3999, 5] = m[10, 7] = np.nan
    for kind in ("max", "min", "argmax", "argmin", "sum"):
        for axis in (0, 1):
            gpu_check(kind, m, axis)


def test_argmax_first_occurrence_across_chunks():
    x = np.random.default_rng(11).integers(0, 3, size=(1 << 20) + 5).astype(np.int32)
    for kind in ("argmax", "argmin"):
        gpu_check(kind, x, None)
        gpu_check(kind, x[: 4096 * 256].reshape(4096, 256), 0)
        gpu_check(kind, x[: 4096 * 256].reshape(4096, 256), 1)
    gpu_check("argmax", np.zeros(100003, bool), None)


def test_empty_reductions():
    e = lt.asarray(np.zeros((0,), np.float32), device="cuda")
    assert e.sum().numpy() == 0 and e.prod().numpy() == 1
    assert np.isnan(e.mean().numpy()) and np.isnan(e.var().numpy())
    z = np.zeros((3, 0), np.float32)
    for kind in ("sum", "prod", "mean", "any", "all", "var"):
        gpu_check(kind, z, 1)
        gpu_check(kind, np.zeros((0, 70), np.float32), 0)
    for kind in ("max", "sum", "argmax"):
        gpu_check(kind, np.zeros((0, 3), np.float32), 1)


@pytest.mark.parametrize("shape,dtype", [((8, 14, 14, 64), np.float32), ((4, 7, 7, 512), np.float16),
                                         ((2, 3, 5, 7), np.float32), ((32, 28, 28, 128), np.float32)])
def test_meanvar_statistics(shape, dtype):
    """The per-channel mean and biased variance in one pass, as the batch-norm path asks for them."""
    backend = backend_for("cuda")
    import cupy
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(shape) * 3 + 5).astype(dtype)
    program = program_for((("load", np.dtype(dtype), 0),), 1, (), np.dtype(dtype))
    spec = Reduction("meanvar", tuple(range(len(shape) - 1)), shape, F64, np.dtype(np.float32))
    stats = cupy.empty((2, shape[-1]), np.float32)
    FusedReduction(backend, program, spec, stats, [cupy.asarray(x)], []).run()
    got = stats.get()
    x64 = x.astype(F64).reshape(-1, shape[-1])
    n = x64.shape[0]
    np.testing.assert_allclose(got[0], x64.mean(0), rtol=2e-7, atol=(n + 2) * 2e-16 * np.abs(x64).mean())
    np.testing.assert_allclose(got[1], x64.var(0), rtol=2e-7, atol=(n + 2) * 2e-16 * (x64 ** 2).mean())


def test_moments_keep_double_precision_with_a_large_mean():
    """The columns loops sum deviations from a running mean in runs (lt_moments::fold): data with a
    mean far larger than its spread, a mean that drifts along the rows, and columns long enough for
    several runs per thread, against float64 NumPy."""
    backend = backend_for("cuda")
    import cupy
    rng = np.random.default_rng(4)
    rows = 1 << 19
    drift = np.linspace(0, 3e4, rows)[:, None]
    cases = [((rng.standard_normal((rows, 64)) * 1e-2 + 1e4).astype(np.float32), 1e-6),
             ((rng.standard_normal((rows, 64)) + 1000).astype(np.float16), 2e-7),
             ((rng.standard_normal((rows, 64)) + drift).astype(np.float32), 2e-7),
             ((rng.standard_normal((rows // 64, 8, 8, 64)) * 1e-3 - 50).astype(np.float32), 1e-6)]
    for x, rtol in cases:
        program = program_for((("load", x.dtype, 0),), 1, (), x.dtype)
        spec = Reduction("meanvar", tuple(range(x.ndim - 1)), x.shape, F64, np.dtype(np.float32))
        stats = cupy.empty((2, x.shape[-1]), np.float32)
        FusedReduction(backend, program, spec, stats, [cupy.asarray(x)], []).run()
        x64 = x.astype(F64).reshape(-1, x.shape[-1])
        np.testing.assert_allclose(stats[0].get(), x64.mean(0), rtol=2e-7)
        np.testing.assert_allclose(stats[1].get(), x64.var(0), rtol=rtol)
    t = lt.asarray(cases[0][0], device="cuda")
    np.testing.assert_allclose(t.var(axis=0).numpy(), cases[0][0].astype(F64).var(0), rtol=1e-6)


def test_bitwise_deterministic_over_runs():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((20011, 131)).astype(np.float32)
    t = lt.asarray(x, device="cuda")
    v = lt.asarray(x.reshape(-1), device="cuda")
    exprs = [lambda: v.sum(), lambda: (v * v).mean(), lambda: t.sum(axis=0), lambda: t.var(axis=0),
             lambda: t.var(), lambda: t.std(axis=1), lambda: t[:, :128].sum(axis=0)]
    first = [e().numpy() for e in exprs]
    for _ in range(3):
        again = [e().numpy() for e in exprs]
        for a, b in zip(first, again):
            assert a.tobytes() == b.tobytes()


def test_fused_reduction_is_one_kernel_and_explains_itself():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((1 << 18) + 1).astype(np.float32), rng.standard_normal((1 << 18) + 1).astype(np.float32)
    ta, tb = lt.asarray(a, device="cuda"), lt.asarray(b, device="cuda")
    expr = ((ta - tb) ** 2).mean()
    text = lt.explain(expr)
    assert "plan: 1 step\n" in text and "cuda reduction kernel" in text and "atomic" not in text, text
    with lt.profile() as p:
        value = expr.numpy()
    assert p.launches == 1 and p.kernels[0].kind == "reduction" and p.kernels[0].backend == "cuda", p
    ref = np.mean((a.astype(F64) - b) ** 2)
    assert abs(float(value) - ref) <= 2e-7 * ref


def test_reduction_inside_a_larger_expression_is_two_steps():
    x = np.random.default_rng(1).standard_normal((4000, 64)).astype(np.float32)
    t = lt.asarray(x, device="cuda")
    centred = t - t.mean(axis=0)
    assert "plan: 2 steps" in lt.explain(centred, source=False)
    with lt.profile() as p:
        got = centred.numpy()
    assert p.launches == 2
    x64 = x.astype(F64)
    np.testing.assert_allclose(got, x64 - x64.mean(axis=0), rtol=1e-6, atol=1e-6)


def test_result_assigned_into_a_view():
    x = np.random.default_rng(4).standard_normal((600, 5))
    ty = lt.asarray(np.zeros((3, 600)), device="cuda")
    ty[1] = lt.asarray(x, device="cuda").sum(axis=1)
    expected = np.zeros((3, 600))
    expected[1] = x.sum(axis=1)
    np.testing.assert_allclose(ty.numpy(), expected, rtol=1e-14, atol=1e-14)
