"""The BN finalize's NumPy twin (cbr/finalize_numpy.py) gives the numba loops' bits
(cbr/finalize_cpu.py), and serves the CPU plans in the default mode."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazytensor.cbr import finalize_cpu, finalize_numpy

EXAMPLES = int(os.environ.get("LT_PROPERTY_EXAMPLES", "25"))


def _vector(rng, c, scale=1.0):
    return (rng.standard_normal(c) * scale).astype(np.float32)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), c=st.integers(1, 70), exponent=st.integers(-8, 3),
       count=st.integers(2, 5000), momentum=st.floats(0, 1), eps=st.sampled_from([1e-3, 1e-5, 1e-6]),
       special=st.sampled_from([None, -0.0, -1e-9, np.nan]))
def test_the_twin_gives_the_loops_bits(seed, c, exponent, count, momentum, eps, special):
    rng = np.random.default_rng(seed)
    mean, gamma, beta, rm = (_vector(rng, c) for _ in range(4))
    var, rv = np.abs(_vector(rng, c, 10.0 ** exponent)), np.abs(_vector(rng, c))
    if special is not None:
        var[::3] = special
    train = [[np.full(c, 7, np.float32) for _ in range(6)] for _ in range(2)]
    finalize_cpu.finalize_train(mean, var, float(count), gamma, beta, rm, rv, momentum, eps, *train[0])
    finalize_numpy.finalize_train(mean, var, float(count), gamma, beta, rm, rv, momentum, eps, *train[1])
    assert [a.tobytes() for a in train[1]] == [a.tobytes() for a in train[0]]
    inference = [[np.full(c, 7, np.float32) for _ in range(2)] for _ in range(2)]
    finalize_cpu.finalize_inference(gamma, beta, rm, rv, eps, *inference[0])
    finalize_numpy.finalize_inference(gamma, beta, rm, rv, eps, *inference[1])
    assert [a.tobytes() for a in inference[1]] == [a.tobytes() for a in inference[0]]


def test_the_default_mode_takes_the_twin(monkeypatch):
    from lazytensor.plan.conv import steps
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    assert steps._host_finalize() is finalize_numpy
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "1")
    monkeypatch.delenv("LAZYTENSOR_TIER", raising=False)
    assert steps._host_finalize() is finalize_cpu
    monkeypatch.setenv("LAZYTENSOR_TIER", "interpreter")
    assert steps._host_finalize() is finalize_numpy
