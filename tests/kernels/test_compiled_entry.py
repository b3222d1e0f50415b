"""The CPU backend calls a small kernel's compiled entry without numba's dispatcher
(kernels/cpu/numba_entry.py): kept by program and rank, valid only while every call passes arguments
of the types the first one did. These tests run programs whose calls could differ in exactly those
types, in turns, against NumPy.

- A program's scalars: `x + True` and `x + 5` (int64), `x * True` and `x * 2.5` (float) are one
  structure, so one program: a Const's value has one Python type
  per dtype kind (a bool in an integer loop is the int 1), or the entry compiled for a boolean
  scalar would read 5 as True.
- A read-only operand (numba types it apart) and a full reduction's kept launch.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from lazytensor.core.expr import Const

SETTINGS = settings(max_examples=15, deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow])

# dtype -> the Python scalars that NumPy keeps in that dtype's loop (weak scalars, NEP 50)
SCALARS = {
    np.int8: st.sampled_from([True, False, 3, -7, 100]),
    np.int64: st.sampled_from([True, False, 5, -2**40, 2**62]),
    np.uint8: st.sampled_from([True, False, 7, 255]),
    np.uint64: st.sampled_from([True, False, 9, 2**63 + 5]),
    np.float32: st.one_of(st.booleans(), st.integers(-2**20, 2**20),
                          st.floats(-1e30, 1e30).map(lambda v: float(np.float32(v)))),
    np.float64: st.one_of(st.booleans(), st.integers(-2**60, 2**60), st.floats(allow_nan=True, allow_infinity=True)),
}
OPS = {"add": lambda x, s: x + s, "multiply": lambda x, s: x * s, "subtract": lambda x, s: s - x}


@SETTINGS
@given(dtype=st.sampled_from(sorted(SCALARS, key=lambda t: np.dtype(t).name)), data=st.data(),
       op=st.sampled_from(sorted(OPS)), n=st.sampled_from([1, 7, 1024]))
def test_one_program_with_scalars_of_every_python_type_in_turns(dtype, data, op, n):
    """Each assignment twice (the second finds the kernel's entry), alternating scalar types."""
    x0 = (np.arange(n) % 11 - 3).astype(dtype)
    x = lt.asarray(x0)
    y = lt.empty_like(x)
    scalars = data.draw(st.lists(SCALARS[dtype], min_size=2, max_size=6))
    f = OPS[op]
    for s in scalars:
        with np.errstate(all="ignore"):
            want = f(x0, s)
        if want.dtype != x0.dtype:
            continue
        for _ in range(2):
            y[...] = f(x, s)
            np.testing.assert_array_equal(y.numpy(), want, err_msg=f"{dtype.__name__} {op} {s!r}")


@pytest.mark.parametrize("first, then, dtype", [
    (True, 5, np.int64), (True, 2.5, np.float32), (False, -3, np.int32), (True, 2**63 + 1, np.uint64),
])
def test_a_program_first_called_with_a_bool_scalar_then_another(first, then, dtype):
    x0 = np.arange(1, 9).astype(dtype)
    x = lt.asarray(x0)
    y = lt.empty_like(x)
    for s in (first, first, first, then, then, first):
        y[...] = x + s
        np.testing.assert_array_equal(y.numpy(), x0 + s)


@pytest.mark.parametrize("dtype, value, kind", [
    (np.int64, True, int), (np.uint8, True, int), (np.float32, True, float), (np.float64, 3, float),
    (np.float16, 2, float), (np.bool_, True, bool),
    (np.uint64, 5, np.uint64),
])
def test_a_consts_value_has_one_python_type_per_dtype_kind(dtype, value, kind):
    c = Const(value, np.dtype(dtype))
    assert type(c.value) is kind and c.value == value


def test_read_only_and_writable_operands_in_turns():
    x0 = np.linspace(-2, 2, 64, dtype=np.float32)
    ro = x0.copy()
    ro.flags.writeable = False
    a, b = lt.asarray(x0.copy()), lt.asarray(ro)
    y = lt.empty_like(a)
    for t in (a, b, b, a, a, b):
        y[...] = lt.relu(t * 3 - 1)
        np.testing.assert_array_equal(y.numpy(), np.maximum(x0 * np.float32(3) - np.float32(1), 0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint64, np.bool_])
def test_full_reductions_through_the_kept_launch(dtype):
    x0 = (np.arange(300) % 7).astype(dtype)
    x = lt.asarray(x0)
    for _ in range(3):
        assert float(x.sum()) == float(np.sum(x0, dtype=np.float64 if dtype in (np.float32, np.float64) else None))
        assert x.max().item() == x0.max()
        assert bool(x.any()) == bool(x0.any())


def test_one_reduction_into_destinations_of_other_dtypes_and_ranks_in_turns():
    x0 = (np.arange(300) % 7).astype(np.float32) * np.float32(0.1)
    x = lt.asarray(x0)
    want = np.float32(np.sum(x0, dtype=np.float64))
    ys = [lt.empty((), np.float32), lt.empty((), np.float64), lt.empty((1,), np.float32), lt.empty((1, 1), np.float64)]
    for _ in range(3):
        for y in ys:
            y[...] = x.sum()
            assert y.numpy().reshape(()) == np.asarray(want, y.dtype)
        assert float(x.sum()) == float(want)


KINDS = ["sum", "mean", "max", "min", "prod", "var", "std", "argmax", "argmin", "any", "all"]


@SETTINGS
@given(kind=st.sampled_from(KINDS), dtype=st.sampled_from([np.float32, np.float64, np.int32, np.uint8, np.bool_]),
       shape=st.sampled_from([(1,), (5,), (300,), (3, 70), (2, 3, 4)]), data=st.data())
def test_a_full_reductions_value_in_one_call_is_the_evaluated_ones_bits(kind, dtype, shape, data):
    """float(r)/r.item() of a full reduction of a CPU tensor: from the third call on, the value
    function (kernels.cpu's reduce_value_seq), which must give the bits that evaluating r gives."""
    if kind in ("var", "std", "mean", "prod") and dtype == np.bool_:
        return
    n = int(np.prod(shape))
    if dtype in (np.float32, np.float64):
        values = st.floats(-1e3, 1e3, width=32) | st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan])
    elif dtype == np.bool_:
        values = st.booleans()
    else:
        values = st.integers(0, 200)
    x0 = np.array(data.draw(st.lists(values, min_size=n, max_size=n)), dtype=dtype).reshape(shape)
    x = lt.asarray(x0)
    with np.errstate(all="ignore"):
        want = getattr(x, kind)()
        want = lt.evaluate(want).numpy().item()
        for _ in range(4):
            got = getattr(x, kind)().item()
            assert type(got) is type(want)
            assert np.array(got).tobytes() == np.array(want).tobytes() or (got != got and want != want), (got, want)


def test_the_value_function_compiles_in_the_background(monkeypatch):
    """With the interpreter tier on, no call compiles reduce_value_seq in the foreground: the first
    call that finds the kept launch submits it and launches; once compiled, calls take it."""
    from lazytensor.kernels.backend import backend_for
    from lazytensor.kernels.cache import KernelCache
    backend = backend_for("cpu")
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    monkeypatch.setattr(backend, "kernels", KernelCache())
    jobs = []
    monkeypatch.setattr(backend.compiler, "submit", lambda key, job: jobs.append((key, job)))
    x0 = (np.arange(777) % 13).astype(np.float32)     # exact sums: every tier gives the same bits
    x = lt.asarray(x0)
    keys, values = [], []
    for _ in range(5):
        values.append(float(x.sum()))
        for key, job in jobs:                         # the worker, between calls
            keys.append(key)
            job()
        jobs.clear()
    assert values == [float(x0.sum(dtype=np.float64))] * 5
    assert any(key[-1] == "reduce_value_seq" for key in keys if type(key) is tuple)
    ready = [r for r in backend._ready_reductions.values() if r.spec.in_shape == (777,) and r.cache is backend.kernels]
    assert ready and ready[0].value_entry
