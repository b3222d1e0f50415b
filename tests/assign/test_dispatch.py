"""The per-call dispatch: the cheap paths that building, assigning and small
reductions take must compute what the general paths compute.

- lower()'s common case finds a program by structure id and passes the scalars the nodes collected
  at build time; the walk that made the program must number the same scalars: one Const object in
  two places (views of an expression copy its tree and share its Consts) is two arguments.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from lazytensor.testing.oracle import assert_matches
from lazytensor.testing.strategies import dags

SETTINGS = settings(max_examples=8, deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# -- one Const object in two places ------------------------------------------------------------------

def test_a_scalar_shared_by_two_views_of_one_expression():
    a = lt.asarray(np.arange(6.))
    e = a * 2.0 + 1.0
    x = np.arange(6.) * 2.0 + 1.0
    got = lt.evaluate(e.reshape(3, 2) * e.reshape(3, 2))
    np.testing.assert_array_equal(got.numpy(), x.reshape(3, 2) * x.reshape(3, 2))


def test_shared_scalars_then_distinct_scalars_of_the_same_structure():
    """The program cached by structure serves both: the second expression's two scalars differ."""
    a = lt.asarray(np.arange(6.))
    e = a * 2.0 + 1.0
    lt.evaluate(e.reshape(3, 2) - e.reshape(3, 2))
    f = (a * 3.0 + 1.0).reshape(3, 2) - (a * 2.0 + 5.0).reshape(3, 2)
    x = np.arange(6.)
    np.testing.assert_array_equal(lt.evaluate(f).numpy(), ((x * 3.0 + 1.0) - (x * 2.0 + 5.0)).reshape(3, 2))


@SETTINGS
@given(dags(max_ops=4), st.sampled_from(["reversed", "flat", "transposed"]))
def test_two_views_of_one_expression_match_numpy(dag, view):
    """v(e) + v(e) for a view v pushed down to e's tensors: two trees over the same Const objects."""
    def look(x):
        if view == "reversed":
            return x[::-1] if x.ndim else x
        if view == "flat":
            return x.reshape(-1)
        return x.T
    e, want = dag.expr, dag.expected
    if not isinstance(e, lt.Expr):
        return
    got = lt.evaluate(look(e) + look(e))
    with np.errstate(all="ignore"):
        expected = np.add(look(want), look(want))
    if expected.dtype != got.dtype:         # bool + bool is bool in both; anything else keeps its dtype
        expected = expected.astype(got.dtype)
    assert_matches(got.numpy(), expected, 2 * look(np.broadcast_to(dag.err, want.shape)), repr(dag))


# -- the cheap paths of a reduction ----------------------------------------------------------------------
# reduce() decides spec, shape and dtype once per case and hands the same spec object out again; the
# CPU backend then launches a compiled reduction of that spec without its first call's choices
# (kernels/cpu/backend.py, _ReadyReduction), on operands laid out as the first call's were, else the general
# path. Repeated calls, calls over other layouts in between, and every spelling must give NumPy's values.

KINDS = ("sum", "mean", "prod", "max", "min", "var", "std", "argmax", "any")


def _reference(kind, x, axis, keepdims):
    if kind in ("argmax",):
        return getattr(np, kind)(x, axis=axis, keepdims=keepdims)
    if kind in ("sum", "mean", "prod", "var", "std"):
        return getattr(np, kind)(x.astype(np.float64), axis=axis, keepdims=keepdims).astype(
            getattr(np, kind)(x, axis=axis).dtype)
    return getattr(np, kind)(x, axis=axis, keepdims=keepdims)


@settings(SETTINGS, max_examples=8)
@given(kind=st.sampled_from(KINDS), shape=st.sampled_from([(7,), (3, 5), (2, 3, 4), (1,), (4, 1)]),
       axis_pick=st.integers(0, 3), keepdims=st.booleans(), seed=st.integers(0, 2**16),
       layouts=st.lists(st.sampled_from(["contiguous", "reversed", "transposed"]), min_size=2, max_size=4))
def test_repeated_reductions_over_changing_layouts_match_numpy(kind, shape, axis_pick, keepdims, seed, layouts):
    nd = len(shape)
    axis = [None, 0, nd - 1, tuple(range(nd))][axis_pick]
    if kind == "argmax" and isinstance(axis, tuple):
        axis = None
    rng = np.random.default_rng(seed)
    for layout in layouts:              # the same case again and again: the spec and launch are reused
        base = rng.standard_normal(shape[::-1] if layout == "transposed" else shape).astype(np.float32)
        if layout == "transposed":
            x = base.T
        elif layout == "reversed":
            x = base[::-1]
        else:
            x = base
        t = lt.asarray(x)
        want = np.asarray(_reference(kind, x, axis, keepdims))
        for _ in range(2):              # the second call of a layout takes the launch the first kept
            got = lt.evaluate(getattr(t, kind)(axis=axis, keepdims=keepdims)).numpy()
            assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
            if kind in ("max", "min", "argmax", "any"):
                np.testing.assert_array_equal(got, want)
            else:
                np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
            assert float(t.sum()) == pytest.approx(float(np.sum(x, dtype=np.float64)), rel=1e-6, abs=1e-6)


def test_one_spec_object_per_case_and_a_new_one_for_another_case():
    a = lt.asarray(np.ones((3, 4), np.float32))
    assert a.sum(axis=1).attrs is a.sum(axis=1).attrs
    assert a.sum(axis=1).attrs is a.sum(axis=-1).attrs is not None
    assert a.sum(axis=0).attrs is not a.sum(axis=1).attrs
    assert a.sum(axis=1, dtype=np.float64).attrs is not a.sum(axis=1).attrs
    b = lt.asarray(np.ones((3, 5), np.float32))
    assert b.sum(axis=1).attrs is not a.sum(axis=1).attrs


def test_errors_are_raised_on_every_call_not_only_the_first():
    a = lt.asarray(np.ones((3, 4), np.float32))
    for _ in range(2):
        with pytest.raises(np.exceptions.AxisError):
            a.sum(axis=2)
        with pytest.raises(TypeError):
            a.argmax(axis=(0, 1))
    np.testing.assert_array_equal(lt.evaluate(lt.sum(a, axis=(0,))).numpy(), np.full(4, 3, np.float32))


def test_a_reduction_at_the_root_reads_a_destination_it_overlaps():
    """y[0] = y.sum() style: the destination is one of the reduction's inputs' elements."""
    x = np.arange(1, 7, dtype=np.float64)
    t = lt.asarray(x.copy())
    for _ in range(2):
        t[0] = t.sum()
        x[0] = x.sum()
        np.testing.assert_array_equal(t.numpy(), x)


def test_a_reduction_read_while_its_tensor_is_written_keeps_its_value():
    x = lt.asarray(np.array([1., 2., 3.], np.float32))
    for expected in (3.0, 0.0, 0.0):
        m = x.max()
        x -= m
        assert float(m) == expected


# -- the unrolled binary node ------------------------------------------------------------------------

def test_binary_nodes_carry_what_expr_computes():
    from lazytensor.core.expr import Expr
    a = lt.asarray(np.arange(4.0))
    b = lt.asarray(np.arange(4.0) + 1)
    for e in (a + b, (a + b) * 2.0, 3.0 - (a * b), (a + b) + (a + b), a + a):
        assert not e.shared                     # (building `again` over e's operands uses them twice)
        again = Expr(e.op, e.args, e.shape, e.dtype, e.device)
        for field in ("skey", "leaves", "scalars", "heavy", "epoch", "attrs", "result"):
            assert getattr(e, field) == getattr(again, field), field
    s = a + b
    e = s * s                                   # one node used twice: shared, lowered by the walk
    assert e.shared
    np.testing.assert_array_equal(lt.evaluate(e).numpy(), (np.arange(4.0) * 2 + 1) ** 2)


def test_a_binary_node_over_an_evaluated_operand_reads_its_result():
    a = lt.asarray(np.arange(4.0))
    s = a + 1.0
    lt.evaluate(s)
    e = s * 2.0
    assert e.args[0] is s.result
    a += 10.0                                   # s keeps its value; e reads it
    np.testing.assert_array_equal(lt.evaluate(e).numpy(), (np.arange(4.0) + 1.0) * 2.0)


def test_memory_records_of_dead_allocations_are_dropped():
    from lazytensor.core import readers
    for _ in range(3000):
        float(lt.asarray(np.ones(3)).sum())
    assert len(readers._records) <= 2 * readers._records_limit[0]
    live = sum(r() is not None for r in readers._records.values())
    assert live < 100


# -- interned scalars ----------------------------------------------------------------------------------

def test_interned_scalars_keep_signed_zeros_types_and_warnings_apart():
    x = np.array([1.0, -1.0, 2.5], np.float32)
    a = lt.asarray(x)
    for s in (0.0, -0.0, 0.0, -0.0):
        got = lt.evaluate(a * s).numpy()
        want = x * np.float32(s)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    i = lt.asarray(np.array([1, 2], np.int8))
    assert lt.evaluate(i + True).dtype == np.int8 and lt.evaluate(i + 1).dtype == np.int8
    assert lt.evaluate(a + True).dtype == np.float32
    np.testing.assert_array_equal(lt.evaluate(a + 1).numpy(), x + 1)
    np.testing.assert_array_equal(lt.evaluate(a - 1.0).numpy(), x - 1.0)
    h = lt.asarray(np.ones(2, np.float16))
    for _ in range(2):                      # NumPy's overflow warning on every line that builds one
        with pytest.warns(RuntimeWarning, match="overflow"):
            e = h + 1e6
        assert np.isinf(lt.evaluate(e).numpy()).all()
