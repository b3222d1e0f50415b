"""The node builders in C (lazytensor/core/_nodes.c) build what the Python builders build.

The operators' known cases are built in C, every other call by the Python builder that the C one
wraps (its `.python`). The oracle is that Python builder: the same program, run once with the C
builders on and once with them off (`_nodes.set_enabled`), must give the same DAG field by field
(op, structure id, dtype, shape, device, operands, leaves, scalars, use counts, shared flags,
epochs), register the same readers with every tensor's memory, and raise the same errors. Each
program runs once first, so that its cases are known and the C builders take them.
"""
import math
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lazytensor as lt
from lazytensor.core import expr
from lazytensor.core.expr import Const, Expr

# (LAZYTENSOR_PYTHON_NODES=1 runs the suite on the Python builders alone; without it the extension
# must be there: a fresh install compiles it)
pytestmark = pytest.mark.skipif(os.environ.get("LAZYTENSOR_PYTHON_NODES", "") not in ("", "0"),
                                reason="the suite runs on the Python builders (LAZYTENSOR_PYTHON_NODES=1)")
EXAMPLES = int(os.environ.get("LT_PROPERTY_EXAMPLES", "70"))

DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8", "bool"]
SHAPES = [(), (1,), (3,), (2, 3), (1, 3), (2, 1), (4,)]
BINARY = ["__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
          "__rtruediv__", "__floordiv__", "__mod__", "__rpow__", "__and__", "__or__", "__xor__",
          "__rshift__", "__lt__", "__ge__", "__eq__", "__ne__"]
UNARY = ["exp", "relu", "tanh", "sqrt", "negative", "absolute", "invert", "floor"]
SCALARS = st.one_of(st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True, width=32),
                    st.booleans(), st.sampled_from([0.0, -0.0, 2**70, 1e300, np.float32(1.5), np.int64(7)]))


def test_the_extension_is_built_and_takes_the_operators():
    # Where it cannot be compiled the library runs on the Python builders alone (setup.py), which
    # must not go unnoticed where it should be there.
    assert expr.node_builder() == "C (lazytensor.core._nodes)"
    assert type(lt.Tensor.__add__).__name__ == "BinaryBuilder"
    assert type(lt.relu).__name__ == "UnaryBuilder"
    assert lt.relu.__name__ == "relu" and "max(x, 0)" in lt.relu.__doc__


@st.composite
def programs(draw):
    """Tensors (dtype, shape) and steps over a pool that starts with them: ("binary", method, i, j
    or a scalar), ("unary", name, i), ("evaluate", i), ("write", tensor index)."""
    dtypes = draw(st.lists(st.sampled_from(DTYPES), min_size=1, max_size=2))     # (few: fewer type errors)
    tensors = draw(st.lists(st.tuples(st.sampled_from(dtypes), st.sampled_from(SHAPES)), min_size=1, max_size=3))
    steps = []
    size = len(tensors)
    recent = st.integers(0, 3)          # (operands are mostly the last few nodes: deep DAGs, reuse)
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["binary"] * 5 + ["scalar"] * 3 + ["unary"] * 3 + ["evaluate"] * 2 + ["write"]))
        i = max(0, size - 1 - draw(recent)) if draw(st.booleans()) else draw(st.integers(0, size - 1))
        if kind == "binary":
            j = max(0, size - 1 - draw(recent)) if draw(st.booleans()) else draw(st.integers(0, size - 1))
            steps.append(("binary", draw(st.sampled_from(BINARY)), i, j))
        elif kind == "scalar":
            steps.append(("scalar", draw(st.sampled_from(BINARY)), i, draw(SCALARS)))
        elif kind == "unary":
            steps.append(("unary", draw(st.sampled_from(UNARY)), i))
        elif kind == "evaluate":
            steps.append(("evaluate", i))
        else:
            steps.append(("write", draw(st.integers(0, len(tensors) - 1))))
        size += kind in ("binary", "scalar", "unary")
    return tensors, steps


def run(program, compiled: bool):
    """The pool after the program's steps, what each step raised, and the readers each tensor's
    memory lists; with the C builders on or off."""
    tensors, steps = program
    was = expr._nodes.set_enabled(compiled)
    try:
        rng = np.random.default_rng(0)
        made = [lt.asarray((rng.standard_normal(s) * 3).astype(d)) for d, s in tensors]
        pool = list(made)
        errors = []
        for step in steps:
            try:
                if step[0] in ("binary", "scalar"):
                    _, method, i, j = step
                    other = pool[j] if step[0] == "binary" else j
                    node = getattr(pool[i], method)(other)
                    pool.append(node)
                elif step[0] == "unary":
                    pool.append(getattr(lt, step[1])(pool[step[2]]) if step[1] in ("exp", "relu", "tanh", "sqrt", "floor")
                                else {"negative": lambda x: -x, "absolute": abs, "invert": lambda x: ~x}[step[1]](pool[step[2]]))
                elif step[0] == "evaluate":
                    if type(pool[step[1]]) is Expr and not pool[step[1]].heavy:
                        lt.evaluate(pool[step[1]])
                else:
                    made[step[1]] += 1
                errors.append(None)
            except Exception as exc:        # (the same error both ways: checked by the caller)
                errors.append((type(exc), str(exc)))
                if step[0] in ("binary", "scalar", "unary"):
                    pool.append(pool[0])
        return made, pool, errors, [len(t.memory) if t.memory is not None else 0 for t in made]
    finally:
        expr._nodes.set_enabled(was)


def describe(x, made, start, memo):
    """Everything a node is, with tensors named by their place in `made` and epochs counted from
    the program's start."""
    if type(x) is lt.Tensor:
        for k, t in enumerate(made):
            if t is x:
                return ("tensor", k)
        return ("result", x.dtype.name, x.shape)
    if type(x) is Const:
        return ("const", type(x.value).__name__, repr(x.value), x.dtype.name, x.skey)
    if type(x) is not Expr:
        return ("other", repr(x))
    key = id(x)
    if key not in memo:
        memo[key] = ("node", x.op, x.skey, x.dtype.name, x.shape, x.device, x.heavy, x.attrs, x.uses,
                     x.shared, x.epoch - start, x.last_plan is None, x.result is None, x.origin is None,
                     tuple(describe(a, made, start, memo) for a in x.args),
                     tuple(describe(t, made, start, memo) for t in x.leaves),
                     tuple((type(s).__name__, repr(s)) for s in x.scalars))
    return memo[key]


def outcome(program, compiled):
    start = expr.RESULTS[0]
    made, pool, errors, readers = run(program, compiled)
    memo = {}
    return [describe(x, made, start, memo) for x in pool], errors, readers


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_c_builders_build_what_the_python_builders_build(program):
    run(program, compiled=False)            # the cases become known
    python = outcome(program, compiled=False)
    assert outcome(program, compiled=True) == python
    assert outcome(program, compiled=False) == python


def operand(kind, t, u):
    """An operand of each kind the builders tell apart, over float32 tensors t and u."""
    if kind == "tensor":
        return t
    if kind == "scalar":
        return 2.5
    if kind == "int":
        return 3
    if kind == "node":
        return t * 2.0
    if kind == "shared node":
        x = t - 1.0
        x * 3.0                     # (used once already: the next use makes a shared node)
        return x
    if kind == "node over a shared one":
        x = t + t
        y = x * x
        return y + 1.0
    if kind == "older node":        # built before a result was given out: a smaller epoch
        x = u * 4.0
        lt.evaluate(t + 7.0)
        return x
    if kind == "evaluated node":
        x = t / 3.0
        lt.evaluate(x)
        return x
    raise AssertionError(kind)


KINDS = ["tensor", "scalar", "int", "node", "shared node", "node over a shared one", "older node", "evaluated node"]


@pytest.mark.parametrize("kind_b", KINDS)
@pytest.mark.parametrize("kind_a", KINDS)
@pytest.mark.parametrize("method", ["__add__", "__rsub__", "__mul__", "__gt__"])
def test_each_pair_of_operand_kinds(kind_a, kind_b, method):
    if kind_a in ("scalar", "int") and kind_b in ("scalar", "int"):
        return
    if kind_a in ("scalar", "int"):
        kind_a, kind_b = kind_b, kind_a
    outcomes = []
    for compiled in (False, False, True, False):     # (the first makes the cases known)
        was = expr._nodes.set_enabled(compiled)
        try:
            start = expr.RESULTS[0]
            t = lt.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
            u = lt.asarray(np.ones(3, np.float32))
            a, b = operand(kind_a, t, u), operand(kind_b, u, t)
            memo = {}
            node = getattr(a, method)(b)
            outcomes.append((describe(node, [t, u], start, memo), describe(a, [t, u], start, memo),
                             describe(b, [t, u], start, memo), len(t.memory or ()), len(u.memory or ())))
        finally:
            expr._nodes.set_enabled(was)
    assert outcomes[2] == outcomes[1] == outcomes[3]


def python_calls(f) -> list:
    """The Python functions that calling f enters (sys.setprofile sees every Python frame)."""
    entered = []
    sys.setprofile(lambda frame, event, arg: entered.append(frame.f_code.co_name) if event == "call" else None)
    try:
        f()
    finally:
        sys.setprofile(None)
    return entered


def test_a_known_case_runs_no_python():
    # The oracle above compares with the Python builder; this checks that the C one took the call:
    # a known case enters no Python function, where the Python builder is one.
    a = lt.asarray(np.ones(3, np.float32))
    for _ in range(2):      # (a case is kept by the first call, its Const 2.0 by the second)
        lt.relu(a * a + 2.0)
    try:
        for compiled, expected in ((True, ["<lambda>"]), (False, ["<lambda>", "build", "build", "build", "_single"])):
            expr._nodes.set_enabled(compiled)
            assert python_calls(lambda: lt.relu(a * a + 2.0)) == expected
    finally:
        expr._nodes.set_enabled(True)


def test_errors_leave_the_operands_as_they_were():
    # Shapes that do not broadcast raise before any operand is counted as used, both ways.
    for compiled in (False, True):
        expr._nodes.set_enabled(compiled)
        try:
            a = lt.asarray(np.ones(3, np.float32))
            b = lt.asarray(np.ones(4, np.float32))
            x = a + a
            with pytest.raises(ValueError, match="broadcast"):
                x + b
            with pytest.raises(ValueError, match="broadcast"):
                x + b
            assert x.uses == 0 and not x.shared
        finally:
            expr._nodes.set_enabled(True)


def test_nan_and_signed_zero_scalars_keep_their_bits():
    a = lt.asarray(np.ones(2, np.float32))
    for value in (math.nan, -0.0, 0.0, math.inf):
        a * value
        node = a * value
        assert repr(node.scalars[0]) == repr(float(value))
        assert np.array_equal(np.asarray(node), np.ones(2, np.float32) * np.float32(value), equal_nan=True)
        assert math.copysign(1, np.asarray(a * value)[0]) == math.copysign(1, value) or math.isnan(value)


@pytest.mark.parametrize("reduction", ["sum", "max", "mean"])
def test_a_reduction_over_a_tensor_is_built_alike(reduction):
    outcomes = []
    for compiled in (False, True, False):
        was = expr._nodes.set_enabled(compiled)
        try:
            start = expr.RESULTS[0]
            t = lt.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
            getattr(t, reduction)(axis=0)
            node = getattr(t, reduction)(axis=0)
            readers = len(t.memory)
            outcomes.append((describe(node, [t], start, {}), node.attrs, readers, float(getattr(t, reduction)())))
        finally:
            expr._nodes.set_enabled(was)
    assert outcomes[1] == outcomes[0] == outcomes[2]
