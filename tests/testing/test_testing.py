"""lazytensor.testing on itself: the strategies draw what they promise (shapes broadcast, the
NumPy references are right, shrinking reaches small examples) and the assertions accept tensors
and expressions with NumPy's messages. Most examples here build expressions without evaluating
them, so they cost no compile."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt
from lazytensor.core.expr import Expr
from lazytensor.testing import (assert_allclose, assert_array_equal, assert_same_as_numpy, broadcastable_shapes,
                                expressions, tensors)

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Ops whose NumPy function of the same name is the reference, so that a drawn DAG's text can be
# evaluated by NumPy directly (an oracle independent of the one in lazytensor.testing.oracle).
PLAIN_OPS = ("add", "subtract", "multiply", "maximum", "minimum", "negative", "absolute", "sqrt", "exp",
             "less", "equal", "where")
LEAVES = st.lists(tensors(dtype=st.sampled_from([np.float64, np.int32, np.bool_]),
                          shape=st.sampled_from([(3,), (2, 3), (1,), ()]), device="cpu",
                          layouts=("contiguous", "strided", "reversed")), min_size=1, max_size=3)


def _depth(node) -> int:
    """Ops on the longest path from a leaf, not counting the casts NumPy's promotion inserts."""
    if isinstance(node, Expr):
        return (node.op != "astype") + max((_depth(a) for a in node.args), default=0)
    return 0


@FAST
@given(st.data())
def test_broadcastable_shapes_broadcast_to_the_shape(data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    drawn = data.draw(broadcastable_shapes(shape))
    assert len(drawn) <= len(shape)
    assert np.broadcast_shapes(drawn, shape) == shape


@FAST
@given(st.data())
def test_broadcastable_shapes_take_a_strategy(data):
    drawn = data.draw(broadcastable_shapes(st.just((4, 5))))
    assert np.broadcast_shapes(drawn, (4, 5)) == (4, 5)


@FAST
@given(tensors(dtype=np.int16, shape=(2, 5), device="cpu", elements=st.integers(-3, 3),
               layouts=("strided", "reversed")))
def test_tensors_have_the_dtype_shape_device_layout_and_elements_asked_for(t):
    assert isinstance(t, lt.Tensor)
    assert (t.dtype, t.shape, t.device) == (np.dtype(np.int16), (2, 5), "cpu")
    assert not t.data.flags.c_contiguous              # strided or reversed memory
    assert ((-3 <= t.numpy()) & (t.numpy() <= 3)).all()


def test_tensors_refuse_an_unknown_layout():
    with pytest.raises(ValueError, match="unknown layout 'diagonal'"):
        tensors(layouts=("diagonal",))


@FAST
@given(st.data())
def test_expressions_have_the_right_numpy_reference(data):
    """The reference equals NumPy evaluating the DAG's own spelling (`dag.text`) on the leaves."""
    leaves = data.draw(LEAVES)
    dag = data.draw(expressions(leaves, ops=PLAIN_OPS, max_depth=3))
    namespace = {op: getattr(np, op) for op in PLAIN_OPS} | {f"t{i}": t.numpy() for i, t in enumerate(leaves)}
    namespace |= {"np": np, "nan": np.nan, "inf": np.inf}
    with np.errstate(all="ignore"):
        again = np.asarray(eval(dag.text, namespace))    # noqa: S307 - our own spelling of the DAG
    assert again.dtype == dag.expected.dtype and again.shape == dag.expected.shape == dag.expr.shape
    assert dag.expr.dtype == dag.expected.dtype
    np.testing.assert_array_equal(again, dag.expected)


@FAST
@given(st.data())
def test_expressions_keep_to_the_ops_and_the_depth(data):
    dag = data.draw(expressions(data.draw(LEAVES), ops=("add", "negative"), max_depth=2))
    assert _depth(dag.expr) <= 2

    def ops(node):
        if isinstance(node, Expr):
            yield node.op
            for a in node.args:
                yield from ops(a)

    assert set(ops(dag.expr)) <= {"add", "negative", "astype"}


@settings(max_examples=3, deadline=None)
@given(st.data())
def test_expressions_check_against_lazytensor(data):
    """A few evaluations (each new structure compiles: the DAG suite of test_expr_properties runs many)."""
    leaves = [data.draw(tensors(np.float32, (4,), device="cpu"))]
    data.draw(expressions(leaves, ops=("add", "multiply", "exp"), max_depth=2)).check()


def test_expressions_refuse_bad_arguments():
    with pytest.raises(ValueError, match="unknown ops \\['matmull'\\]"):
        expressions([lt.zeros(3, device="cpu")], ops=("matmull",))
    with pytest.raises(TypeError, match="non-empty sequence of lazytensor Tensors"):
        expressions([np.zeros(3)])
    with pytest.raises(ValueError, match="max_depth must be at least 1"):
        expressions([lt.zeros(3, device="cpu")], max_depth=0)


def test_shrinking_reaches_the_smallest_tensor():
    t = find(tensors(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=8), device="cpu"),
             lambda t: t.size >= 4, settings=settings(max_examples=200, database=None, derandomize=True))
    assert t.shape == (4,)


def test_shrinking_reaches_the_smallest_expression():
    leaves = [lt.asarray(np.array([1.0, -2.0]), device="cpu"), lt.asarray(np.array([3.0, 4.0]), device="cpu")]
    dag = find(expressions(leaves, max_depth=4), lambda d: "exp" in d.text,
               settings=settings(max_examples=500, database=None, derandomize=True, deadline=None))
    assert re.fullmatch(r"exp\w*\(t[01]\)", dag.text), dag.text     # one op (exp, exp2, expm1) over one leaf


# -- assertions ----------------------------------------------------------------------------------

def test_assertions_accept_tensors_and_expressions():
    x = np.array([0.5, -1.0, 2.0], np.float32)
    t = lt.asarray(x, device="cpu")
    assert_allclose(lt.exp(t), np.exp(x), rtol=1e-6)
    assert_allclose(np.exp(x), lt.exp(t), rtol=1e-6)
    assert_array_equal(t * 2, x * 2)
    assert_array_equal(t, x)


def test_assertions_give_numpys_messages():
    t = lt.asarray(np.array([1.0, 2.0, 3.0]), device="cpu")
    with pytest.raises(AssertionError, match="Not equal to tolerance") as info:
        assert_allclose(t + 1e-3, np.array([1.0, 2.0, 3.0]))
    assert "Mismatched elements: 3 / 3" in str(info.value)
    with pytest.raises(AssertionError, match="Arrays are not equal"):
        assert_array_equal(t * 2, np.array([2.0, 4.0, 7.0]))
    with pytest.raises(AssertionError, match="dtype"):
        assert_array_equal(t, np.array([1, 2, 3]), strict=True)


def _softmax(x):
    lib = lt if isinstance(x, lt.Tensor) else np
    e = lib.exp(x - lib.max(x, axis=-1, keepdims=True))
    return e / lib.sum(e, axis=-1, keepdims=True)


def test_assert_same_as_numpy_passes_a_right_function():
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 1e3]], np.float32)
    got = assert_same_as_numpy(_softmax, x)
    np.testing.assert_allclose(got.sum(axis=-1), 1, rtol=1e-6)
    assert_same_as_numpy(lambda a, b: (a + b, a * b, a > b), x, np.float32(2))
    assert_same_as_numpy(lambda a: a // 3, np.arange(-5, 5, dtype=np.int8))


def test_assert_same_as_numpy_names_a_wrong_value_dtype_or_shape():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        assert_same_as_numpy(lambda a: a * 2 if isinstance(a, np.ndarray) else a * 2.001, x)
    with pytest.raises(AssertionError, match="dtype float64 on lazytensor tensors, float32 on NumPy arrays"):
        assert_same_as_numpy(lambda a: a if isinstance(a, np.ndarray) else a.astype(np.float64), x)
    with pytest.raises(AssertionError, match="shape \\(1, 3\\) on lazytensor tensors, \\(3,\\) on NumPy"):
        assert_same_as_numpy(lambda a: a if isinstance(a, np.ndarray) else lt.expand_dims(a, 0), x)
    with pytest.raises(AssertionError, match="returned 2 values on lazytensor tensors and one value"):
        assert_same_as_numpy(lambda a: a if isinstance(a, np.ndarray) else (a, a), x)
    with pytest.raises(AssertionError, match="Arrays are not equal"):
        assert_same_as_numpy(lambda a: a + 1 if isinstance(a, np.ndarray) else a + 2, np.arange(3))


# -- optional dependencies -------------------------------------------------------------------------

def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_assertions_work_without_hypothesis_and_strategies_say_what_to_install():
    run = _run("import sys; sys.modules['hypothesis'] = None\n"
               "import numpy as np, lazytensor as lt, lazytensor.testing as T\n"
               "T.assert_allclose(lt.asarray(np.ones(3), device='cpu') * 2, np.full(3, 2.0))\n"
               "try:\n    T.tensors\nexcept ImportError as e:\n    print(e)\n")
    assert run.returncode == 0, run.stderr
    assert "pip install 'lazytensor[test]'" in run.stdout


def test_the_library_imports_no_optional_extra():
    run = _run("import sys, numpy as np, lazytensor as lt\n"
               "a = lt.asarray(np.ones(5, np.float32), device='cpu')\n"
               "lt.evaluate(lt.exp(a) + 1); str(lt.explain(a * 2)); repr(a * 2); repr(a)\n"
               "print(sorted(m for m in ('pandas', 'matplotlib', 'tqdm', 'hypothesis', 'pygments') if m in sys.modules))")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
