"""Dask programs over lazytensor chunks compute the NumPy-backed Dask program's values: elementwise
float64 bit for bit (transcendentals within 4 ULPs), reductions within 1e-12 of the sum of |x|
(the tree adds in another order), on the synchronous, threaded and distributed schedulers (the
session's LocalCluster of two worker processes, tests/dask_backend/conftest.py)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.dask_backend.programs import (APPROX_UNARY, EXACT_BINARY, EXACT_UNARY, REDUCTIONS, chunked_shapes,
                                         inputs, programs, run)

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

LOCAL = ("synchronous", "threads")
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


def on(scheduler):
    """x's value as a NumPy array, computed by a local scheduler."""
    def compute(x):
        with dask.config.set(scheduler=scheduler):
            return np.asarray(x.compute())
    return compute


def on_the_cluster(client):
    return lambda x: np.asarray(client.compute(x).result(timeout=120))


def assert_reduction_close(actual, expected, scale):
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-12 * max(scale, 1.0))


def check_fixed_expression(compute, chunking, seed, which):
    """The issue's expressions and a difference of squares, compiled kernels, any chunking; the
    NumPy-backed program on the synchronous scheduler is the oracle."""
    shape, chunks = chunking
    exprs = [lambda d, e: (d * 2 + 1) ** 0.5 - da.sin(d), lambda d, e: da.maximum((d + e) * e + 5 * d, 0),
             lambda d, e: (d - e) ** 2]
    f = exprs[which]
    oracle = on("synchronous")
    lazy, plain = f(*inputs(shape, chunks, seed, "lazytensor")), f(*inputs(shape, chunks, seed, "numpy"))
    got, want = compute(lazy), oracle(plain)
    if which == 0:
        np.testing.assert_array_max_ulp(got, want, maxulp=4)
    else:
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))
    assert_reduction_close(compute(lazy.sum()), oracle(plain.sum()), np.abs(want).sum())


def check_drawn_program(compute, chunking, seed, steps, data):
    """A drawn elementwise program and a drawn reduction of it."""
    shape, chunks = chunking
    oracle = on("synchronous")
    unary = {**EXACT_UNARY, **APPROX_UNARY} if data.draw(st.booleans()) else EXACT_UNARY
    lazy = run(steps, *inputs(shape, chunks, seed, "lazytensor"), unary, EXACT_BINARY)
    plain = run(steps, *inputs(shape, chunks, seed, "numpy"), unary, EXACT_BINARY)
    got, want = compute(lazy), oracle(plain)
    assert got.dtype == want.dtype and got.shape == want.shape
    if unary is EXACT_UNARY:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_array_max_ulp(got, want, maxulp=4)
    name = data.draw(st.sampled_from(REDUCTIONS))
    axis = data.draw(st.sampled_from([None, 0, -1]))
    r_lazy, r_plain = getattr(lazy, name)(axis=axis), getattr(plain, name)(axis=axis)
    assert_reduction_close(compute(r_lazy), oracle(r_plain), np.abs(want).sum())


@pytest.fixture
def interpreter_tier(monkeypatch):
    """Drawn programs run through the interpreter tier (the kernels' programs run with NumPy's
    ufuncs) while their kernels compile in the background: many structures, no compile each; the
    compiled kernels are the fixed expressions' and the kernel suites'."""
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")


@pytest.fixture
def interpreter_tier_on_the_workers(client, interpreter_tier):
    """The cluster's workers run the interpreter tier, for one test."""
    client.run(os.environ.__setitem__, "LAZYTENSOR_TIER", "interpreter")
    yield
    client.run(os.environ.pop, "LAZYTENSOR_TIER", None)


@pytest.mark.parametrize("scheduler", LOCAL)
@settings(max_examples=20, deadline=None, suppress_health_check=SLOW)
@given(chunking=chunked_shapes(), seed=st.integers(0, 2**16), which=st.integers(0, 2))
def test_fixed_expressions_over_drawn_chunkings(scheduler, chunking, seed, which):
    check_fixed_expression(on(scheduler), chunking, seed, which)


@settings(max_examples=6, deadline=None, suppress_health_check=SLOW)
@given(chunking=chunked_shapes(), seed=st.integers(0, 2**16), which=st.integers(0, 2))
def test_fixed_expressions_over_drawn_chunkings_on_the_cluster(client, chunking, seed, which):
    check_fixed_expression(on_the_cluster(client), chunking, seed, which)


@pytest.mark.parametrize("scheduler", LOCAL)
@settings(max_examples=40, deadline=None, suppress_health_check=SLOW)
@given(chunking=chunked_shapes(), seed=st.integers(0, 2**16), steps=programs(), data=st.data())
@pytest.mark.usefixtures("interpreter_tier")
def test_drawn_programs(scheduler, chunking, seed, steps, data):
    check_drawn_program(on(scheduler), chunking, seed, steps, data)


@settings(max_examples=4, deadline=None, suppress_health_check=SLOW)
@given(chunking=chunked_shapes(), seed=st.integers(0, 2**16), steps=programs(), data=st.data())
@pytest.mark.usefixtures("interpreter_tier_on_the_workers")
def test_drawn_programs_on_the_cluster(client, chunking, seed, steps, data):
    check_drawn_program(on_the_cluster(client), chunking, seed, steps, data)
