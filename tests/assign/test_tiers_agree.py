"""The two tiers give the same bits: reductions accumulate in the kernels' order in the interpreter
tier too (kernels/cpu/interpret_reduce.py), so a value does not change when the compiled kernel
takes over; and the interpreter tier works in bounded memory (blocks, each intermediate freed after
its last use, a broadcast never copied to full size)."""
from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import lazytensor as lt
from lazytensor.testing import assert_matches, dags
from tests.support.tiers import in_both_tiers, interpreter_tier

EXAMPLES = int(os.environ.get("LT_PROPERTY_EXAMPLES", "25"))


def _same(a, b) -> bool:
    """The same dtype, shape and bits; NaNs in the same places (their sign and payload aside: the
    kernels' float16 stores give the canonical NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return a.tobytes() == b.tobytes()
    nan = np.isnan(a)
    bits = f"u{a.itemsize}"
    return bool(np.array_equal(nan, np.isnan(b)) and np.array_equal(a[~nan].view(bits), b[~nan].view(bits)))


@pytest.mark.compiled_tier
def test_a_mean_keeps_its_bits_when_the_kernel_arrives():
    t = lt.asarray(np.random.default_rng(0).standard_normal(10 ** 5))
    interpreted, compiled = in_both_tiers(lambda: float(lt.mean(t ** 2)))
    assert interpreted.hex() == compiled.hex()
    assert interpreted.hex() != float(np.mean(t.numpy() ** 2)).hex()   # (NumPy's pairwise sum: other bits)


@pytest.mark.compiled_tier
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(dag=dags(max_ops=6))
def test_random_programs_give_the_same_bits_in_both_tiers(dag):
    """Exact values bit for bit (the sign of zero included), the same dtype and shape; approximate
    ones within twice the oracle's bound of each other."""
    interpreted, compiled = in_both_tiers(lambda: lt.evaluate(dag.expr).numpy())
    err = np.asarray(dag.err, np.float64)
    assert_matches(interpreted, compiled, err * 2, repr(dag))


def _reduction_cases():
    rng = np.random.default_rng(1)
    cases = []
    for n in (1, 17, 1000, (1 << 17) + 5):
        x = rng.standard_normal(n) * 10.0 ** rng.integers(-4, 5, n)
        cases += [(f"sum-{n}", x, None, "sum"), (f"mean32-{n}", x.astype(np.float32), None, "mean"),
                  (f"prod-{n}", 1 + x * 1e-6, None, "prod")]
    for shape, axis in [((30, 100), 1), ((30, 100), 0), ((5, 4, 3), (0, 2)), ((5, 4, 3), (1, 2)),
                        ((600, 300), 1), ((300, 600), 0), ((20, 30, 40), 1), ((3, 300, 200), None)]:
        x = rng.standard_normal(shape)
        cases += [(f"{kind}-{shape}-{axis}", x, axis, kind) for kind in ("sum", "mean", "prod")]
        cases.append((f"sum-transposed-{shape}-{axis}", np.ascontiguousarray(x.T).T, axis, "sum"))
    x = np.array([-0.0, -0.0, -0.0]), np.array([np.inf, -np.inf, 1.0]), np.array([np.nan, 1.0])
    cases += [(f"special-{i}", v, None, "sum") for i, v in enumerate(x)]
    return cases


@pytest.mark.compiled_tier
@pytest.mark.parametrize("name, x, axis, kind", _reduction_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_float_reductions_give_the_kernel_s_bits(name, x, axis, kind):
    t = lt.asarray(x)
    interpreted, compiled = in_both_tiers(lambda: lt.evaluate(getattr(lt, kind)(t * 1.5, axis=axis)).numpy())
    assert _same(interpreted, compiled), name


@pytest.mark.compiled_tier
def test_a_sum_of_a_broadcast_product_gives_the_kernel_s_bits():
    rng = np.random.default_rng(2)
    a, b = lt.asarray(rng.standard_normal(300)), lt.asarray(rng.standard_normal(500))
    interpreted, compiled = in_both_tiers(lambda: float((a[:, None] * b[None, :]).sum()))
    assert interpreted.hex() == compiled.hex()


def _peak(f):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        value = f()
        return value, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_a_long_chain_holds_blocks_not_whole_temporaries():
    n = 1 << 21
    x = lt.asarray(np.random.default_rng(3).standard_normal(n).astype(np.float32))
    y = lt.empty((n,), np.float32)

    def chain():
        e = x
        for k in range(16):
            e = e * 1.001 + k if k % 2 else lt.abs(e) - 0.5
        y[...] = e
    with interpreter_tier():
        _, peak = _peak(chain)
    assert peak < 0.5 * y.nbytes, peak         # (whole temporaries: 16 of y's size)


def test_a_sum_of_an_outer_product_never_holds_the_product():
    a, b = lt.asarray(np.ones(4096, np.float32)), lt.asarray(np.full(4096, 2.0, np.float32))
    with interpreter_tier():
        value, peak = _peak(lambda: float((a[:, None] * b[None, :]).sum()))
    assert value == 2.0 * 4096 ** 2
    assert peak < 48 << 20, peak                # (the product: 64 MiB as float32, 128 as float64)


def test_a_sum_of_a_huge_broadcast_is_summed_in_pieces():
    n = 1 << 28
    with interpreter_tier():
        value, peak = _peak(lambda: float(lt.sum(lt.broadcast_to(lt.asarray(np.ones(1, np.float32)), (n,)))))
    assert value == float(n)
    assert peak < 48 << 20, peak                # (the broadcast: 1 GiB)


@pytest.mark.slow
def test_a_sum_of_2_to_the_36_ones():
    with interpreter_tier():
        value = float(lt.sum(lt.broadcast_to(lt.asarray(np.ones(1, np.float32)), (2 ** 36,))))
    assert value == 68719476736.0


@pytest.mark.parametrize("kind", ["max", "argmin", "any", "var"])
def test_other_reductions_of_a_huge_broadcast_run_in_pieces(kind):
    n = 1 << 26
    x = np.arange(7, dtype=np.float32)
    with interpreter_tier():
        value, peak = _peak(lambda: lt.evaluate(getattr(lt, kind)(
            lt.broadcast_to(lt.asarray(x)[:, None], (7, n)) - 3, axis=1)).numpy())
    np.testing.assert_array_equal(value, getattr(np, kind)(np.broadcast_to(x[:, None] - 3, (7, 16)), axis=1))
    assert peak < 64 << 20, peak                # (the broadcast: 1.75 GiB)


@pytest.mark.compiled_tier
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("kind", ["cumsum", "cumprod"])
def test_scans_give_the_kernel_s_bits(dtype, kind):
    x = np.array([-0.0, -0.0, 1.5, -1.5, -0.0, 2.0, np.inf, 3.0, -0.25], dtype)
    t = lt.asarray(np.stack([x, x[::-1]]))
    interpreted, compiled = in_both_tiers(lambda: lt.evaluate(getattr(lt, kind)(t * 1, axis=1)).numpy())
    assert _same(interpreted, compiled)


@pytest.mark.parametrize("n", [5, (1 << 17) + 7])
def test_several_results_in_the_interpreter_read_before_they_store(n):
    """y's value is x as it was: the interpreter stores x + x into x after reading x for y."""
    xn, yn = np.arange(n, dtype=np.float32), -np.arange(n, dtype=np.float32)
    x, y = lt.asarray(xn.copy()), lt.asarray(yn.copy())
    with interpreter_tier():
        lt.assign([(x, x + x), (y, x)])
    np.testing.assert_array_equal(x.numpy(), xn + xn)
    np.testing.assert_array_equal(y.numpy(), xn)
