"""float16 matmul on the CPU (kernels/cpu/matmul_f16.py): NumPy's numbers bit for bit (NaN's sign
apart), on hypothesis-drawn shapes (1-D operands, broadcast batches, sizes 0 and 1, long sums) and
values (signed zeros, inf, NaN, overflow of the float16 result), and the choice said in lt.explain."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from lazytensor.kernels import matmul as cpu_matmul
from tests.ops.test_matmul import matmul_shapes

SETTINGS = settings(max_examples=int(os.environ.get("LT_PROPERTY_EXAMPLES", "40")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
_SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, -65504.0, 6e-8], np.float16)


def _operand(shape, rng, scale, specials):
    x = (rng.standard_normal(shape) * scale).astype(np.float16)
    if specials and x.size:
        flat = x.reshape(-1)
        at = rng.integers(0, x.size, size=min(3, x.size))
        flat[at] = rng.choice(_SPECIAL, size=at.size)
    return x


def _same(ours, want):
    """Equal bit for bit, except that a NaN may carry either sign."""
    assert ours.dtype == want.dtype == np.float16 and ours.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(ours), nan)
    np.testing.assert_array_equal(ours.view(np.uint16)[~nan], want.view(np.uint16)[~nan])


@pytest.fixture
def kernel_always(monkeypatch):
    """The float16 kernel for every product, however small."""
    monkeypatch.setattr(cpu_matmul, "FLOAT16_KERNEL_MIN_WORK", 0)


@SETTINGS
@given(matmul_shapes(max_core=7), st.integers(0, 2**16), st.sampled_from([1e-3, 1.0, 30.0, 300.0]), st.booleans())
def test_float16_kernel_gives_numpys_numbers(kernel_always, shapes, seed, scale, specials):
    rng = np.random.default_rng(seed)
    a, b = _operand(shapes[0], rng, scale, specials), _operand(shapes[1], rng, 1.0, specials)
    with np.errstate(all="ignore"):
        want = np.matmul(a, b)
        _same(np.asarray(lt.asarray(a, device="cpu") @ lt.asarray(b, device="cpu")), want)


@pytest.mark.parametrize("n, k, m", [(64, 2048, 64), (48, 1024, 48), (1, 4000, 3), (20, 333, 1)])
def test_long_sums_round_as_numpys_loop(kernel_always, n, k, m):
    # Long sums: a float32 BLAS product rounded to float16 differs from NumPy's in the last bit in a
    # few elements of the first two (blocked sums round differently).
    rng = np.random.default_rng(5)
    a, b = _operand((n, k), rng, 3.0, False), _operand((k, m), rng, 1.0, False)
    _same(np.asarray(lt.asarray(a, device="cpu") @ lt.asarray(b, device="cpu")), np.matmul(a, b))


def test_explain_says_which_runs(monkeypatch):
    a, b = (lt.asarray(np.ones(s, np.float16), device="cpu") for s in ((4, 8), (8, 2)))
    assert "NumPy matmul (BLAS)" in str(lt.explain(a @ b, source=False))
    monkeypatch.setattr(cpu_matmul, "FLOAT16_KERNEL_MIN_WORK", 4 * 8 * 2)
    assert "float16 kernel" in str(lt.explain(a @ b, source=False))
    with lt.profile() as p:
        out = lt.evaluate(a @ b)
    assert [k.kind for k in p.kernels] == ["matmul"]
    np.testing.assert_array_equal(np.asarray(out), np.full((4, 2), 8, np.float16))
