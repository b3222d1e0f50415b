"""The interpreter tier's flat runners (kernels/cpu/interpret_flat.py): later calls of a program over
flat operands run its generated block function, and give the bits of the first call (run_program)
and of NumPy, at every size (one block, blocks and a tail, 0-d), whatever scalars they pass."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import lazytensor as lt
from lazytensor.kernels.cpu import backend as cpu_backend
from lazytensor.kernels.cpu.interpret import BLOCK
from lazytensor.testing import dags
from tests.support.tiers import interpreter_tier

EXAMPLES = int(os.environ.get("LT_PROPERTY_EXAMPLES", "25"))


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.tobytes()


@pytest.fixture
def run_program_calls(monkeypatch):
    """The calls that took run_program (the unplanned path), counted."""
    calls = []
    real = cpu_backend.run_program

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)
    monkeypatch.setattr(cpu_backend, "run_program", counted)
    return calls


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(dag=dags(max_ops=6))
def test_later_calls_give_the_first_call_s_bits_and_numpy_s_values(dag):
    with interpreter_tier():
        first = lt.evaluate(dag.expr).numpy()
        for _ in range(2):
            again = lt.evaluate(dag.expr).numpy()
            assert _bits(again) == _bits(first), repr(dag)
        dag.check(again)


def _operands(n, shape):
    rng = np.random.default_rng(n)
    xs = [rng.standard_normal(n).astype(np.float32).reshape(shape) for _ in range(4)]
    xs[0].reshape(-1)[::7] = -0.0
    xs[1].reshape(-1)[::11] = np.nan
    xs[2].reshape(-1)[::13] = np.inf
    return xs


@pytest.mark.parametrize("shape", [(), (1,), (1000,), (BLOCK,), (3 * BLOCK + 17,), (70, 3001)])
def test_assigned_calls_run_the_flat_runner_with_numpy_s_bits(shape, run_program_calls):
    n = int(np.prod(shape))
    x0, x1, x2, x3 = _operands(n, shape)
    with np.errstate(all="ignore"):
        r = (x0 + x1) * x2 + np.float32(5) * x3
        want = np.where((r > 0) | (r != r), r, np.float32(0))
    with interpreter_tier():
        a, b, c, d = (lt.asarray(x) for x in (x0, x1, x2, x3))
        for _ in range(3):
            y = lt.asarray(np.full(shape, 7, np.float32))
            y[...] = lt.relu((a + b) * c + 5 * d)
            assert _bits(y.numpy()) == _bits(want)
    assert len(run_program_calls) == 1          # (the first call; the later ones took the runner)


def test_equal_scalars_of_other_bits_are_converted_again(run_program_calls):
    x = np.arange(1, 9, dtype=np.float32)
    with interpreter_tier():
        a = lt.asarray(-x)
        for s in (0.0, -0.0, 0.0, -0.0, 2.0):       # (0.0 == -0.0)
            y = lt.empty_like(a)
            y[...] = a * s
            assert _bits(y.numpy()) == _bits(-x * np.float32(s)), s
    assert len(run_program_calls) == 1


def test_a_busy_runner_leaves_the_call_to_run_program(run_program_calls):
    x = np.arange(10, dtype=np.float32)
    with interpreter_tier() as backend:
        a = lt.asarray(x)
        y = lt.empty_like(a)
        y[...] = a * 3 + 1
        (runner, *_), = backend._flat_kernels[3].values()
        with runner.busy:                       # (as while another thread runs it)
            y[...] = a * 3 + 1
        assert y.numpy().tolist() == (x * 3 + 1).tolist()
    assert len(run_program_calls) == 2


def test_a_profiled_call_of_the_runner_is_recorded_as_the_interpreter_s(run_program_calls):
    x = np.arange(10, dtype=np.float32)
    with interpreter_tier():
        a = lt.asarray(x)
        y = lt.empty_like(a)
        y[...] = a * 3 + 1
        with lt.profile() as p:
            y[...] = a * 3 + 1
        assert y.numpy().tolist() == (x * 3 + 1).tolist()
    assert [k.name for k in p.kernels] == ["interpreter"] and p.kernels[0].elements == 10
    assert len(run_program_calls) == 1
