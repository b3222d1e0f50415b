"""Dask programs over lazytensor chunks compute the NumPy-backed Dask program's values: elementwise
float64 bit for bit (transcendentals within 4 ULPs), reductions within 1e-12 of the sum of |x|
(the tree adds in another order), on the synchronous and threaded schedulers."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.dask_backend.programs import (APPROX_UNARY, EXACT_BINARY, EXACT_UNARY, REDUCTIONS, chunked_shapes,
                                         inputs, programs, run)

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

SCHEDULERS = ("synchronous", "threads")


def compute(x, scheduler):
    with dask.config.set(scheduler=scheduler):
        return np.asarray(x.compute())


def assert_reduction_close(actual, expected, scale):
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-12 * max(scale, 1.0))


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunking=chunked_shapes(), seed=st.integers(0, 2**16), which=st.integers(0, 2))
def test_fixed_expressions_over_drawn_chunkings(scheduler, chunking, seed, which):
    """The issue's expressions and a difference of squares, compiled kernels, any chunking."""
    shape, chunks = chunking
    exprs = [lambda d, e: (d * 2 + 1) ** 0.5 - da.sin(d), lambda d, e: da.maximum((d + e) * e + 5 * d, 0),
             lambda d, e: (d - e) ** 2]
    f = exprs[which]
    lazy, plain = f(*inputs(shape, chunks, seed, "lazytensor")), f(*inputs(shape, chunks, seed, "numpy"))
    got, want = compute(lazy, scheduler), compute(plain, scheduler)
    if which == 0:
        np.testing.assert_array_max_ulp(got, want, maxulp=4)
    else:
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))
    assert_reduction_close(compute(lazy.sum(), scheduler), compute(plain.sum(), scheduler), np.abs(want).sum())


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(chunking=chunked_shapes(), seed=st.integers(0, 2**16), steps=programs(), data=st.data())
def test_drawn_programs(monkeypatch, scheduler, chunking, seed, steps, data):
    """Drawn elementwise programs and a reduction of them. Through the interpreter tier (the kernels'
    programs run with NumPy's ufuncs): many structures, no compile each; the compiled kernels are the
    fixed expressions' above and the kernel suites'."""
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    shape, chunks = chunking
    unary = {**EXACT_UNARY, **APPROX_UNARY} if data.draw(st.booleans()) else EXACT_UNARY
    lazy = run(steps, *inputs(shape, chunks, seed, "lazytensor"), unary, EXACT_BINARY)
    plain = run(steps, *inputs(shape, chunks, seed, "numpy"), unary, EXACT_BINARY)
    got, want = compute(lazy, scheduler), compute(plain, scheduler)
    assert got.dtype == want.dtype and got.shape == want.shape
    if unary is EXACT_UNARY:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_array_max_ulp(got, want, maxulp=4)
    name = data.draw(st.sampled_from(REDUCTIONS))
    axis = data.draw(st.sampled_from([None, 0, -1]))
    r_lazy, r_plain = getattr(lazy, name)(axis=axis), getattr(plain, name)(axis=axis)
    assert_reduction_close(compute(r_lazy, scheduler), compute(r_plain, scheduler), np.abs(want).sum())
