"""Writes to expressions mean what they mean in NumPy: `y[k] = v` and `y += v` change the object y
(every name bound to it sees the write), expressions built on it before keep their values, and no
other object changes. Random programs of builds, writes and rebinds run on NumPy and on lazytensor,
and every live name is compared after each statement, in both tiers."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lazytensor as lt
from lazytensor.assign import own_memory
from lazytensor.kernels.backend import backend_for
from lazytensor.kernels.cache import KernelCache

EXAMPLES = int(os.environ.get("LT_PROPERTY_EXAMPLES", "60"))
PROFILE = settings(max_examples=EXAMPLES, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                          HealthCheck.function_scoped_fixture])


def same(got, want):
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=0)


# -- the cases -------------------------------------------------------------------------------
def test_a_masked_write_into_an_expression():
    x = lt.asarray([1.0, -2.0, 3.0])
    y = x * 2
    y[y < 0] = 0.0
    same(y, [2.0, 0.0, 6.0])
    same(x, [1.0, -2.0, 3.0])


def test_an_item_write_into_an_expression():
    x = lt.asarray([1.0, -2.0, 3.0])
    y = lt.exp(x)
    y[0] = 0.0
    same(y, [0.0, np.exp(-2.0), np.exp(3.0)])


def test_every_name_of_the_object_sees_an_in_place_operator():
    x = lt.asarray([1.0, -2.0, 3.0])
    y = x * 2
    z = y
    w = y * 10                      # built before: keeps its value
    s = y.sum()                     # a reduction built before, too
    y += 1
    assert z is y
    same(z, [3.0, -3.0, 7.0])
    same(w, [20.0, -40.0, 60.0])
    assert s.item() == 4.0
    same(x, [1.0, -2.0, 3.0])


def test_an_evaluated_expression_gives_its_writes_memory_of_its_own():
    x = lt.asarray([1.0, -2.0, 3.0])
    y = x * 2
    t = lt.evaluate(y)              # the Tensor lt.evaluate handed out is another object
    a = lt.empty(3)
    b = x + 1
    a[...] = b                      # b's result is a's memory
    y[1] = 100.0
    b[0] = -1.0
    same(t, [2.0, -4.0, 6.0])
    same(y, [2.0, 100.0, 6.0])
    same(a, [2.0, -1.0, 4.0])
    same(b, [-1.0, -1.0, 4.0])


def test_an_expression_written_through_a_later_view():
    x = lt.asarray(np.arange(6.0).reshape(2, 3))
    y = x + 0
    y[0, 0] = 9.0                   # y owns its memory now: views of it are views of that memory
    v = y[1]
    v[...] = -1.0
    y.T[2, 0] = 7.0
    same(y, [[9.0, 1.0, 7.0], [-1.0, -1.0, -1.0]])
    same(v, [-1.0, -1.0, -1.0])


def test_integer_array_writes_and_fill():
    x = lt.asarray(np.arange(5.0))
    y = x * 1.5
    y[np.array([0, 3])] = -1.0
    same(y, [-1.0, 1.5, 3.0, -1.0, 6.0])
    y[lt.asarray(np.array([4]))] = y[0:1]
    same(y, [-1.0, 1.5, 3.0, -1.0, -1.0])
    z = x * 2
    z.fill(3.0)
    same(z, [3.0] * 5)


def test_a_write_that_cannot_cast_raises_and_keeps_the_values():
    x = lt.asarray(np.arange(3))
    y = x * 2
    with pytest.raises(TypeError):
        y += 1.5                    # NumPy: Cannot cast ufunc 'add' output from float64 to int64
    same(y, [0, 2, 4])


def test_a_write_with_one_name_asks_the_collector_nothing(monkeypatch):
    """The common `y = x * 2; y[y < 0] = 0` finds the expressions built on y inside the write."""
    asked = []
    monkeypatch.setattr(own_memory, "_live_parents", lambda node: asked.append(node) or [])
    x = lt.asarray([1.0, -2.0])
    y = x * 2
    y[y < 0] = 0.0
    y2 = x * 3
    y2 *= y2 + 1
    y3 = x * 4
    alias, listed = y3, [y3]        # three holders, and every node built on y3 is in the write
    y3[y3 > 0] = y3.max() * 2       # a heavy node built on it, too
    assert asked == []
    same(y, [2.0, 0.0])
    same(y2, [12.0, 30.0])
    same(alias, [8.0, -8.0])
    assert listed[0] is y3


# -- the Array API's array protocols on expressions -----------------------------------------------------
def test_dlpack_of_an_expression():
    x = lt.asarray([1.0, -2.0, 3.0])
    e = lt.exp(x)
    assert e.__dlpack_device__() == (1, 0) and x.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(e), np.exp([1.0, -2.0, 3.0]))
    np.testing.assert_array_equal(np.from_dlpack(x * 2, copy=True), [2.0, -4.0, 6.0])
    np.testing.assert_array_equal(np.from_dlpack(e, device="cpu"), np.exp([1.0, -2.0, 3.0]))
    capsule = (x + 1).__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0), copy=False)
    assert type(capsule).__name__ == "PyCapsule"
    from lazytensor import array_api as xp
    np.testing.assert_array_equal(xp.from_dlpack(x * 3).numpy(), [3.0, -6.0, 9.0])


def test_array_api_compat_sees_a_writable_array():
    compat = pytest.importorskip("array_api_compat")
    from lazytensor import array_api as xp
    x = xp.asarray([1.0, 2.0])
    e = x * 2
    assert compat.is_writeable_array(e) and compat.array_namespace(e) is xp
    assert e.device == "cpu" and e.to_device("cpu") is e
    e[0] = 5.0                      # what is_writeable_array promises
    same(e, [5.0, 4.0])


@pytest.mark.gpu
@pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")
def test_on_cuda_writes_to_expressions_and_dlpack():
    import cupy
    x = lt.asarray(np.array([1.0, -2.0, 3.0]), device="cuda")
    y = x * 2
    z = y
    w = y * 10
    assert y.__dlpack_device__() == (2, cupy.cuda.Device().id)
    y[y < 0] = 0.0
    y[np.array([2])] = 5.0
    y += 1
    same(z, [3.0, 1.0, 6.0])
    same(w, [20.0, -40.0, 60.0])
    same(x, [1.0, -2.0, 3.0])
    np.testing.assert_array_equal(cupy.from_dlpack(x * 3).get(), [3.0, -6.0, 9.0])
    assert (x * 3).__dlpack_device__()[0] == 2


# -- random programs against NumPy -----------------------------------------------------------------
NAMES = 4
SHAPES = [(1,), (5,), (3, 4), (2, 3, 2)]


def _build(kind, a, b, mod):
    """One build statement over two operands (the same code reads NumPy arrays and lazytensor arrays)."""
    if kind == 0:
        return a + b
    if kind == 1:
        return a * b - 0.5
    if kind == 2:
        return mod.maximum(a, -b)
    if kind == 3:
        return a - a.mean(axis=0, keepdims=True)        # a reduction below
    if kind == 4:
        return mod.where(a > b, a, b * 2)
    if kind == 5:
        return a.copy()
    return mod.exp(a * 0.1)


def _index(kind, shape, k):
    """A key of each kind: basic (an integer, a slice, a tuple), an integer array along axis 0."""
    n = shape[0]
    if kind == 0:
        return k % n
    if kind == 1:
        return slice(k % n, None, 1 + k % 2)
    if kind == 2:
        return (k % n, Ellipsis) if len(shape) > 1 else (Ellipsis,)
    return np.array([k % n, (k + 1) % n, k % n])


statements = st.tuples(st.sampled_from(["build", "build", "rebind", "item", "mask", "inplace", "write_from", "look", "item_add"]),
                       st.integers(0, NAMES - 1), st.integers(0, NAMES - 1), st.integers(0, NAMES - 1),
                       st.integers(0, 6), st.integers(0, 50))
programs = st.tuples(st.sampled_from(SHAPES), st.integers(0, 2**31 - 1), st.lists(statements, min_size=1, max_size=10))


def _step(env, mod, stmt):
    """Apply one statement to a namespace `env` of arrays of module `mod` (NumPy or lazytensor)."""
    what, d, a, b, kind, k = stmt
    if what == "build":
        env[d] = _build(kind, env[a], env[b], mod)
    elif what == "rebind":
        env[d] = env[a]
    elif what == "look":                                # lazytensor evaluates it (and keeps its result)
        np.asarray(env[d])
    elif what == "item":                                # basic or integer-array key, a scalar
        env[d][_index(kind % 4, env[d].shape, k)] = float(k) - 20.5
    elif what == "item_add":                            # y[k] += v: the read of y[k] is a temporary
        key = _index(kind % 4, env[d].shape, k) if kind < 4 else env[a] > 0
        env[d][key] += 1.5 * k
    elif what == "mask":                                # a mask read from the destination itself, or another
        src = env[d] if kind % 2 else env[a]
        env[d][src > 0.25 * (k % 4)] = -float(k)
    elif what == "write_from":                          # the value read from another name (or itself)
        key = _index(kind % 4, env[d].shape, k)
        src = env[a]
        env[d][key] = src[key] * 3
    else:                                               # an in-place operator
        target, other = env[d], env[a]
        if kind % 4 == 0:
            target += other
        elif kind % 4 == 1:
            target *= other * 0.5
        elif kind % 4 == 2:
            target -= 1.25
        else:
            target /= 2.0
        env[d] = target                                 # (the statement rebinds the name, to the same object)


def _run(program):
    shape, seed, stmts = program
    rng = np.random.default_rng(seed)
    want = {i: rng.standard_normal(shape) for i in range(NAMES)}
    got = {i: lt.asarray(v.copy()) for i, v in want.items()}
    for n, stmt in enumerate(stmts):
        _step(want, np, stmt)
        _step(got, lt, stmt)
        for i in range(NAMES):
            # Read through a new node, so that the names stay unevaluated (an evaluated node no
            # longer holds the nodes below it, and the write would have nothing to keep).
            np.testing.assert_allclose(lt.evaluate(got[i] * 1.0).numpy(), want[i], rtol=1e-12, atol=1e-300,
                                       err_msg=f"name {i} after statement {n}: {stmts[:n + 1]}")
        for i in range(NAMES):
            for j in range(NAMES):
                assert (got[i] is got[j]) == (want[i] is want[j]), f"names {i}, {j} after {stmts[:n + 1]}"


@PROFILE
@given(program=programs)
def test_random_programs_match_numpy(program):
    _run(program)


@pytest.fixture
def interpreter_only(monkeypatch):
    """Every elementwise call on the CPU runs through the interpreter tier (as in test_interpreter_tier)."""
    backend = backend_for("cpu")
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    monkeypatch.setattr(backend, "kernels", KernelCache())
    monkeypatch.setattr(backend.compiler, "submit", lambda key, job: None)
    return backend


@settings(PROFILE, max_examples=max(10, EXAMPLES // 3))
@given(program=programs)
def test_random_programs_match_numpy_in_the_interpreter_tier(interpreter_only, program):
    _run(program)
