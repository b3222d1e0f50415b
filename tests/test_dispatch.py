"""The per-call dispatch (issue 16, part 2): the cheap paths that building, assigning and small
reductions take must compute what the general paths compute.

- lower()'s common case finds a program by structure id and passes the scalars the nodes collected
  at build time; the walk that made the program must number the same scalars: one Const object in
  two places (views of an expression copy its tree and share its Consts) is two arguments.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from lazytensor.testing.oracle import assert_matches
from lazytensor.testing.strategies import dags

SETTINGS = settings(max_examples=15, deadline=None, print_blob=True,
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
