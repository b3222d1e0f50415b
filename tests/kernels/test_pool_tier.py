"""Pooling on the CPU in the default mode: its NumPy twin (kernels/cpu/pool_numpy.py) gives numba's
bits (kernels/cpu/pool.py) for every window shape, stride, padding, dtype, NaN, -inf and tie, and
serves the calls while a compile worker compiles numba's (kernels/cpu/pool_tier.py)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazytensor.kernels.cpu import pool_numpy, pool_tier

EXAMPLES = int(os.environ.get("LT_PROPERTY_EXAMPLES", "25"))


@st.composite
def pool_cases(draw):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    ph, pw = draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))
    h, w = draw(st.integers(kh, 9)), draw(st.integers(kw, 9))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.float16]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((2, h, w, 3))
    if draw(st.booleans()):
        x = np.round(x)                                          # ties
    special = draw(st.sampled_from([None, np.nan, -np.inf, np.inf, -0.0]))
    if special is not None:
        x[rng.random(x.shape) < 0.25] = special
    if draw(st.booleans()):
        x[rng.random(x.shape) < 0.1] = np.nan
    x = x.astype(dtype)
    if draw(st.booleans()):                                      # a strided input
        x = np.concatenate([x, x], axis=3)[..., ::2]
    return x, (kh, kw), (sh, sw), (ph, pw), rng


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=pool_cases(), kind=st.sampled_from(["max", "avg"]))
def test_the_numpy_twin_gives_numba_s_bits(case, kind):
    from lazytensor.kernels.cpu import pool
    x, kernel, stride, padding, rng = case
    p_ = (x.shape[1] + 2 * padding[0] - kernel[0]) // stride[0] + 1
    q_ = (x.shape[2] + 2 * padding[1] - kernel[1]) // stride[1] + 1
    y_numba, y_twin = (np.full((2, p_, q_, 3), 7, x.dtype) for _ in range(2))
    pool.pool_forward(kind, x, kernel, stride, padding, y_numba)
    pool_numpy.pool_forward(kind, x, kernel, stride, padding, y_twin)
    assert y_twin.tobytes() == y_numba.tobytes()
    g = rng.standard_normal(y_numba.shape).astype(x.dtype)
    g[rng.random(g.shape) < 0.2] = -0.0                          # a gradient's sign of zero: the sums' +0.0
    source = x if kind == "max" else None
    d_numba, d_twin = (np.full(x.shape, 7, x.dtype) for _ in range(2))
    pool.pool_backward(kind, source, g, kernel, stride, padding, d_numba)
    pool_numpy.pool_backward(kind, source, g, kernel, stride, padding, d_twin)
    assert d_twin.tobytes() == d_numba.tobytes()


class _Compiler:
    """The background compiler's side that run_pool asks: one open flag per submitted key."""

    def __init__(self):
        self.flags, self.jobs = {}, []

    def open_flag(self, key):
        return self.flags.get(key)

    def submit(self, key, job):
        self.flags[key] = [True]
        self.jobs.append(job)

    def failed(self, key):
        return False

    def lost(self, key):
        return None


def test_the_twin_serves_until_numba_s_kernel_arrives(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    monkeypatch.delenv("LAZYTENSOR_TIER", raising=False)
    ran = []
    monkeypatch.setattr(pool_tier, "_twin", lambda *a: ran.append("twin"))
    monkeypatch.setattr(pool_tier, "_numba", lambda *a: ran.append("numba"))
    compiler = _Compiler()
    x = np.zeros((1, 4, 4, 2), np.float32)
    y = np.empty((1, 2, 2, 2), np.float32)
    for _ in range(2):
        pool_tier.run_pool(compiler, "forward", "max", x, None, (2, 2), (2, 2), (0, 0), y)
    assert ran == ["twin", "twin"] and len(compiler.jobs) == 1       # (submitted once)
    job = compiler.jobs[0]
    assert job.fn is pool_tier.compile_pool and job.args[0] == "forward"
    (flag,) = compiler.flags.values()
    flag[0] = False                                                   # (arrived)
    pool_tier.run_pool(compiler, "forward", "max", x, None, (2, 2), (2, 2), (0, 0), y)
    assert ran[-1] == "numba"


@pytest.mark.parametrize("layout", ["C", "F", "A"])
def test_the_compile_job_compiles_the_call_s_types(layout):
    from lazytensor.kernels.cpu import pool
    description = ("<f4", layout, True)
    small = pool_tier._small(description)
    assert pool_tier._description(small) == description
    list(pool_tier.compile_pool("forward", "avg", (description, ("<f4", "C", True)), (3, 3), (1, 1), (1, 1)))
    assert any(sig[0].layout == layout for sig in pool._forward.signatures)
