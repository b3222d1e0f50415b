"""Where lazytensor.array_api follows the standard rather than NumPy: floor_divide's special cases
with infinite operands (the standard's table, against NumPy elsewhere), finfo/iinfo as Python
numbers, tuples from broadcast_arrays/meshgrid, conj of real dtypes."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt
import lazytensor.array_api as xp
from lazytensor.testing.strategies import elements

INF = np.inf


def _standard_floor_divide(a, b):
    """The standard's floor_divide: NumPy's, but x1 / x2 where an operand is infinite."""
    with np.errstate(all="ignore"):
        return np.where(np.isinf(a) | np.isinf(b), a / b, np.floor_divide(a, b))


@pytest.mark.parametrize("a,b,want", [(INF, 2.0, INF), (INF, -2.0, -INF), (-INF, 2.0, -INF), (-INF, -2.0, INF),
                                      (1.0, -INF, -0.0), (-1.0, INF, -0.0), (1.0, INF, 0.0), (-1.0, -INF, 0.0),
                                      (INF, INF, np.nan), (7.0, 2.0, 3.0), (-7.0, 2.0, -4.0)])
def test_floor_divide_special_cases_follow_the_standard(a, b, want):
    for x1, x2 in ((xp.asarray(np.array([a])), xp.asarray(np.array([b]))), (xp.asarray(np.array([a])), b)):
        got = xp.floor_divide(x1, x2).numpy()
        np.testing.assert_array_equal(got, [want])
        assert np.isnan(want) or np.signbit(got[0]) == np.signbit(want)
    # the lt namespace and the operator stay NumPy's
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((lt.asarray(np.array([a])) // b).numpy(), np.floor_divide([a], b))


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(("float32", "float64")).flatmap(
    lambda d: st.tuples(*(hnp.arrays(d, hnp.array_shapes(max_dims=2, max_side=4), elements=elements(d)),) * 2)))
def test_floor_divide_matches_the_standard_on_drawn_values(pair):
    a, b = pair
    try:
        with np.errstate(all="ignore"):
            want = _standard_floor_divide(a, b) if a.dtype.kind == "f" else np.floor_divide(a, b)
    except ValueError:
        return          # shapes that do not broadcast
    got = xp.floor_divide(xp.asarray(a), xp.asarray(b))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)


def test_floor_divide_of_integers_is_numpys():
    e = xp.floor_divide(xp.asarray(np.array([7, -7], np.int8)), 2)
    assert e.dtype == np.int8
    np.testing.assert_array_equal(e.numpy(), [3, -4])


def test_finfo_iinfo_are_python_numbers():
    for arg in (xp.float32, np.dtype("float32"), xp.asarray(np.ones(1, np.float32))):
        f = xp.finfo(arg)
        assert all(type(v) is float for v in (f.eps, f.max, f.min, f.smallest_normal))
        assert (f.bits, f.dtype, f.eps) == (32, np.float32, float(np.finfo(np.float32).eps))
    i = xp.iinfo(xp.asarray(np.ones(1, np.uint16)))
    assert (i.bits, i.min, i.max, i.dtype) == (16, 0, 65535, np.uint16) and type(i.max) is int
    with pytest.raises(ValueError, match="use iinfo"):
        xp.finfo(xp.int32)


def test_tuples_and_conj():
    t = xp.asarray(np.arange(3.0))
    assert isinstance(xp.broadcast_arrays(t, t), tuple) and isinstance(xp.meshgrid(t, t), tuple)   # 2025.12
    assert isinstance(lt.broadcast_arrays(t, t), tuple)     # NumPy's
    assert isinstance(xp.__array_namespace_info__().devices(), tuple)
    np.testing.assert_array_equal(np.asarray(xp.conj(t)), np.arange(3.0))   # a new array of a real one's values, as NumPy's


def test_the_standards_keyword_names():
    x = np.array([-2.0, 0.5, 3.0])
    t = xp.asarray(x)
    np.testing.assert_array_equal(xp.clip(t, max=1.0).numpy(), np.clip(x, None, 1.0))
    np.testing.assert_array_equal(xp.clip(t, min=0.0, max=None).numpy(), np.clip(x, 0.0, None))
    assert xp.clip(t, max=None) is t
    r = xp.reshape(t, shape=(3, 1), copy=True)
    assert isinstance(r, lt.Tensor) and r.shape == (3, 1) and r.data is not t.data
    assert xp.reshape(t, (1, 3)).shape == (1, 3)


@pytest.mark.parametrize("axis", [-3, 2, 5])
def test_expand_dims_refuses_axes_out_of_range_as_numpy(axis):
    x = np.ones(3)
    with pytest.raises(np.exceptions.AxisError) as got:
        lt.expand_dims(lt.asarray(x), axis)
    with pytest.raises(np.exceptions.AxisError) as want:
        np.expand_dims(x, axis)
    assert str(got.value) == str(want.value) and isinstance(got.value, IndexError)


def test_take_along_axis_defaults_to_the_last_axis():
    x = np.array([[3.0, 1.0, 2.0], [0.5, 0.25, 1.0]])
    idx = np.argsort(x, axis=-1)
    np.testing.assert_array_equal(xp.take_along_axis(xp.asarray(x), xp.asarray(idx)).numpy(),
                                  np.take_along_axis(x, idx, axis=-1))
