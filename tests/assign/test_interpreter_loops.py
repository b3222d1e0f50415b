"""The interpreter tier's small calls in C: a flat runner's plan as NumPy's inner loops
(kernels/cpu/interpret_cloops.py, _ufunc_loops.c) and Tensor.__setitem__'s path to it
(lazytensor/assign/_direct_path.c). Each gives the bits of the Python block functions and of
NumPy's ufuncs, is taken only for the structure it was kept for, and leaves every other call (new
scalars, readers of the destination, a profile, other dtypes or layouts) to the Python path."""
from __future__ import annotations

import contextlib
import operator
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt
from lazytensor.assign import direct
from lazytensor.kernels.cpu import interpret_cloops
from tests.support.tiers import interpreter_tier

EXAMPLES = int(os.environ.get("LT_PROPERTY_EXAMPLES", "25"))

pytestmark = pytest.mark.skipif(os.environ.get("LAZYTENSOR_PYTHON_NODES", "") not in ("", "0"),
                                reason="the C paths are off")


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.tobytes()


def test_the_c_paths_are_compiled_and_agree_with_numpy_s_layouts():
    assert interpret_cloops.AVAILABLE
    assert direct._direct_path is not None and type(lt.Tensor.__dict__["__setitem__"]).__name__ == "Setitem"


@contextlib.contextmanager
def python_paths(monkeypatch):
    """The Python block functions and setitem only (fresh runners: interpreter_tier's new cache)."""
    monkeypatch.setattr(interpret_cloops, "AVAILABLE", False)
    was = direct._direct_path.set_enabled(False)
    try:
        yield
    finally:
        direct._direct_path.set_enabled(was)
        monkeypatch.undo()


@pytest.fixture
def run_flat_calls(monkeypatch):
    """The calls that reached the CPU backend's run_flat (the Python path of `y[...] = e`)."""
    with interpreter_tier() as backend:
        calls = []
        real = backend.run_flat

        def counted(program, out, inputs, scalars):
            calls.append(program)
            return real(program, out, inputs, scalars)
        monkeypatch.setattr(backend, "run_flat", counted)
        yield calls


# -- the loops: NumPy's own functions, so NumPy's bits -------------------------------------------

def _special(dtype):
    return [0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.5, 3.0, np.finfo(dtype).max, np.finfo(dtype).tiny]


LOOP_CASES = [(u, t) for u in sorted(interpret_cloops.LOOP_UFUNCS, key=lambda u: u.__name__)
              for t in u.types if "O" not in t and all(c in "?bBhHiIlLqQefdFD" for c in t.replace("->", ""))]


@pytest.mark.parametrize("ufunc,types", LOOP_CASES, ids=[f"{u.__name__}-{t}" for u, t in LOOP_CASES])
def test_a_plan_of_one_step_is_the_ufunc_s_loop(ufunc, types):
    ins, out_t = types.split("->")
    dts = [np.dtype(c) for c in ins + out_t]
    rng = np.random.default_rng(len(types))
    for n in (1, 3, 17, 100, 1031):
        xs = []
        for dt in dts[:-1]:
            if dt.kind in "fc":
                x = np.resize(np.array(_special(np.float64 if dt.kind == "c" else dt), dt), n)
                x[::2] = (rng.standard_normal(len(x[::2])) * 100).astype(dt)
            elif dt.kind == "b":
                x = rng.integers(0, 2, n).astype(dt)
            else:
                info = np.iinfo(dt)
                x = rng.integers(info.min, info.max, n, endpoint=True, dtype=dt)
            xs.append(x)
        with np.errstate(all="ignore"):
            want = ufunc(*xs)
        if want.dtype != dts[-1] or ufunc.resolve_dtypes((*dts[:-1], None)) != tuple(dts) or \
                any(x.dtype is not dt for x, dt in zip(xs, dts)):
            continue                # (not NumPy's loop for these inputs, or not arrays of its dtype
            #                          objects: 'q' for int64's 'l': plans never take it)
        out = np.full(n, 1, dts[-1])
        plan = interpret_cloops._ufunc_loops.Plan(
            n, (dts[-1], *dts[:-1]), len(xs), 0, [],
            [(ufunc, tuple(d.num for d in dts), tuple(range(1, len(xs) + 1)) + (0,),
              tuple(d.itemsize for d in dts[:-1]) + (dts[-1].itemsize,))])
        assert plan(out, xs, ()) is True
        assert _bits(out) == _bits(want), (ufunc, types, n)


def test_a_plan_refuses_arrays_not_of_its_types_sizes_or_layouts_and_writes_nothing():
    f4 = np.dtype(np.float32)
    plan = interpret_cloops._ufunc_loops.Plan(8, (f4, f4, f4), 2, 0, [], [(np.add, (11, 11, 11), (1, 2, 0), (4, 4, 4))])
    a, b = np.arange(8, dtype=f4), np.ones(8, f4)
    out = np.zeros(8, f4)
    read_only = np.zeros(8, f4)
    read_only.flags.writeable = False
    for args in ((out, [a, b.astype(np.float64)], ()), (out, [a, b[:4]], ()), (np.zeros(16, f4)[::2], [a, b], ()),
                 (read_only, [a, b], ()), (out, [np.arange(16, dtype=f4)[::2], b], ()), (out, [a], ()),
                 (out, [a, b], (np.float32(1),)), (out.view(np.int32), [a, b], ()), (out, [a.tolist(), b], ())):
        assert plan(*args) is False
        assert not out.any() and not read_only.any()
    assert plan(out, [a, b], ()) is True and out.tolist() == (a + b).tolist()
    assert plan(out.reshape(2, 4), (a.reshape(4, 2), b), ()) is True      # (any C-contiguous shape)


# -- `y[...] = e` through them -----------------------------------------------------------------

BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
          "maximum": np.maximum, "minimum": np.minimum}
UNARY = {"relu": None, "negative": np.negative, "abs": np.absolute, "sqrt": np.sqrt}
LT = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "divide": operator.truediv,
      "maximum": lt.maximum, "minimum": lt.minimum, "relu": lt.relu, "negative": operator.neg, "abs": lt.abs,
      "sqrt": lt.sqrt}


def _relu(x):
    return np.where((x > 0) | (x != x), x, x.dtype.type(0))


def _chain_program(dtype, shape, steps, arrays, scalars):
    """(the lazytensor expression over fresh tensors, NumPy's value)."""
    leaves = iter(arrays)
    first = next(leaves)
    x, ref = lt.asarray(first), first
    k = 0
    for op, operand in steps:
        if op in UNARY:
            fn = UNARY[op]
            x = LT[op](x)
            ref = _relu(ref) if op == "relu" else fn(ref)
            continue
        if operand == "scalar":
            s = scalars[k % len(scalars)]
            k += 1
            other, other_ref = s, dtype.type(s)
        else:
            a = next(leaves)
            other, other_ref = lt.asarray(a), a
        x = LT[op](x, other)
        ref = BINARY[op](ref, other_ref)
    return x, np.asarray(ref, dtype)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), dtype=st.sampled_from([np.dtype(np.float32), np.dtype(np.float64)]),
       shape=st.sampled_from([(), (1,), (5,), (64,), (1000,), (3, 7)]),
       steps=st.lists(st.tuples(st.sampled_from(sorted(BINARY) + sorted(UNARY)), st.sampled_from(["leaf", "scalar"])),
                      min_size=1, max_size=6),
       scalars=st.lists(st.sampled_from([0.0, -0.0, 5.0, -1.5, float("inf"), float("nan"), 1e30]), min_size=1,
                        max_size=3))
def test_assigned_chains_give_the_python_path_s_bits_and_numpy_s_values(data, dtype, shape, steps, scalars,
                                                                        monkeypatch):
    n_leaves = 1 + sum(1 for op, o in steps if op in BINARY and o == "leaf")
    elements = st.floats(allow_nan=True, allow_infinity=True, width=8 * dtype.itemsize)
    arrays = [data.draw(hnp.arrays(dtype, shape, elements=elements)) for _ in range(n_leaves)]
    got = []
    for python in (False, True):
        with contextlib.ExitStack() as stack:
            if python:
                stack.enter_context(python_paths(monkeypatch))
            stack.enter_context(interpreter_tier())
            with np.errstate(all="ignore"):
                e, want = _chain_program(dtype, shape, steps, arrays, scalars)
                y = lt.asarray(np.full(shape, 7, dtype))
                for _ in range(4):              # (the first call, the runner's, then the C paths')
                    y[...] = e
                    got.append(_bits(y.numpy()))
                    e, _ = _chain_program(dtype, shape, steps, arrays, scalars)
    assert len(set(got)) == 1, steps
    np.testing.assert_array_equal(y.numpy(), want)      # (NaN equal to NaN)


def test_the_c_path_serves_only_the_structure_it_kept(run_flat_calls):
    rng = np.random.default_rng(0)
    x0, x1, x2 = (rng.standard_normal(100).astype(np.float32) for _ in range(3))
    a, b, c = (lt.asarray(x) for x in (x0, x1, x2))
    y = lt.empty_like(a)
    for _ in range(5):
        y[...] = a * b + c
    # the first call runs run_program, the second makes the loops and keeps them, the rest take C
    assert len(run_flat_calls) == 2
    assert y.numpy().tolist() == (x0 * x1 + x2).tolist()
    before = len(run_flat_calls)
    for _ in range(4):
        y[...] = a * b - c                          # another structure: kept on its own
    assert y.numpy().tolist() == (x0 * x1 - x2).tolist()
    assert len(run_flat_calls) - before == 2
    d64 = lt.asarray(x0.astype(np.float64))
    z = lt.empty_like(d64)
    before = len(run_flat_calls)
    for _ in range(4):
        z[...] = d64 * 2 + 1                       # another dtype
    assert z.numpy().tolist() == (x0.astype(np.float64) * 2 + 1).tolist()
    assert len(run_flat_calls) - before == 2
    w = lt.asarray(np.zeros(50, np.float32))
    half = lt.asarray(x0[:50].copy())
    before = len(run_flat_calls)
    for _ in range(3):
        w[...] = half * 3 + 1                       # another shape
    assert w.numpy().tolist() == (x0[:50] * 3 + 1).tolist()
    assert len(run_flat_calls) - before == 2


def test_new_scalars_readers_and_profiles_take_the_python_path(run_flat_calls):
    x = np.arange(1, 9, dtype=np.float32)
    a = lt.asarray(x)
    y = lt.asarray(np.zeros(8, np.float32))
    for _ in range(3):
        y[...] = a * 2.0
    kept = len(run_flat_calls)
    for s in (0.0, -0.0, 0.0, -0.0, 2.5):           # equal scalars of other bits are not the same
        y[...] = a * s
        assert _bits(y.numpy()) == _bits(x * np.float32(s)), s
    assert len(run_flat_calls) > kept
    y[...] = a * 2.0
    old = y.numpy().copy()
    z = y + 0                                       # a live reader of y's memory keeps its value
    y[...] = a * 2.0 + 1
    assert z.numpy().tolist() == old.tolist() and y.numpy().tolist() == (x * 2 + 1).tolist()
    for _ in range(3):
        y[...] = a * 3.0
    with lt.profile() as p:
        y[...] = a * 3.0
    assert [k.name for k in p.kernels] == ["interpreter"]


@pytest.mark.compiled_tier
def test_a_compiled_kernel_takes_over_from_the_c_path():
    x = np.arange(16, dtype=np.float32)
    with interpreter_tier():
        a = lt.asarray(x)
        y = lt.empty_like(a)
        for _ in range(3):
            y[...] = a * 4 - 1
    # the tier no longer forced: the kept runner's settings differ, so the C path refuses
    with lt.profile() as p:
        y[...] = a * 4 - 1
    assert y.numpy().tolist() == (x * 4 - 1).tolist()
    assert p.kernels and p.kernels[0].name != "interpreter"


def test_threads_assigning_one_structure_get_their_own_values():
    import threading
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(300).astype(np.float32) for _ in range(8)]
    errors = []
    with interpreter_tier():
        def work(k):
            a, b = lt.asarray(xs[2 * k]), lt.asarray(xs[2 * k + 1])
            y = lt.empty_like(a)
            want = (xs[2 * k] * xs[2 * k + 1] + 2).tobytes()
            for _ in range(200):
                y[...] = a * b + 2
                if y.numpy().tobytes() != want:
                    errors.append(k)
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors


def test_a_closed_compile_or_a_new_kernel_cache_ends_the_c_path(run_flat_calls):
    x = np.arange(12, dtype=np.float32)
    a = lt.asarray(x)
    y = lt.empty_like(a)
    backend = lt.asarray(x).backend
    for _ in range(3):
        y[...] = a * 5 + 2
    kept = len(run_flat_calls)
    y[...] = a * 5 + 2
    assert len(run_flat_calls) == kept              # (the C path)
    for runner, flag, *_ in list(backend._flat_kernels[3].values()):
        flag[0] = False                             # as when the kernel arrived, failed or was lost
    y[...] = a * 5 + 2
    assert len(run_flat_calls) == kept + 1 and y.numpy().tolist() == (x * 5 + 2).tolist()
    kept = len(run_flat_calls)
    for _ in range(3):
        y[...] = a * 5 + 2          # (that call made a new runner: its loops, then the C path again)
    assert len(run_flat_calls) == kept + 1
    backend.kernels = type(backend.kernels)()       # a new kernel cache: new flat lookups
    y[...] = a * 5 + 2
    assert len(run_flat_calls) == kept + 2 and y.numpy().tolist() == (x * 5 + 2).tolist()


def test_a_runner_the_backend_dropped_is_not_held_by_the_c_path(run_flat_calls):
    import gc
    import weakref
    x = np.arange(20, dtype=np.float32)
    a = lt.asarray(x)
    y = lt.empty_like(a)
    backend = a.backend
    for _ in range(3):
        y[...] = a * 7 - 3
    (runner, *_), = backend._flat_kernels[3].values()
    alive = weakref.ref(runner.busy)
    del runner
    backend._flat_kernels[3].clear()                # (as FlatRunners' bounds drop every runner)
    kept = len(run_flat_calls)
    y[...] = a * 7 - 3
    assert len(run_flat_calls) == kept + 1 and y.numpy().tolist() == (x * 7 - 3).tolist()
    gc.collect()
    assert alive() is None


def test_a_read_only_destination_of_a_kept_structure_raises_as_before():
    x = np.arange(6, dtype=np.float32)
    with interpreter_tier():
        a = lt.asarray(x)
        y = lt.empty_like(a)
        for _ in range(3):
            y[...] = a * 2 + 1
        frozen = np.zeros(6, np.float32)
        frozen.flags.writeable = False
        r = lt.asarray(frozen)
        with pytest.raises(Exception) as caught:
            r[...] = a * 2 + 1
        with python_paths(pytest.MonkeyPatch()):
            with pytest.raises(type(caught.value)) as python_caught:
                r[...] = a * 2 + 1
        assert str(caught.value) == str(python_caught.value)
        assert not frozen.any()
