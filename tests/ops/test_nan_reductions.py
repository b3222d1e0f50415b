"""np.nansum, nanprod, nanmax, nanmin, nanmean, nanvar, nanstd, nanargmax, nanargmin, nancumsum and
nancumprod on tensors, through NumPy's protocol and as lt.<name>, against NumPy on the host: odd
shapes, 0-d, empty, NaN/inf/-0.0, float and integer dtypes, axis as int or tuple, keepdims, ddof,
dtype, out=."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt

SETTINGS = settings(max_examples=15, deadline=None)
NAMES = ("nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin")
DTYPES = (np.float64, np.float32, np.int32, np.int8, np.uint8)


def outcome(f):
    """f()'s value, or the type of what it raised (NumPy's warnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = f()
        except (ValueError, TypeError) as e:
            return type(e)
        return np.asarray(r)


def same(got, want, rtol):
    if isinstance(want, type):
        assert got is want, f"NumPy raised {want.__name__}, lazytensor gave {got!r}"
        return
    assert not isinstance(got, type), f"lazytensor raised {got.__name__}, NumPy gave {want!r}"
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-3, equal_nan=True)


@st.composite
def cases(draw):
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    if dtype.kind == "f":
        values = st.one_of(st.sampled_from([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.0]), st.floats(-8, 8))
        a = draw(hnp.arrays(dtype, shape, elements=values.map(dtype.type)))
    else:
        a = draw(hnp.arrays(dtype, shape, elements=st.integers(0, 5)))
    axis = draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1) if shape else st.none(),
                          st.lists(st.integers(0, len(shape) - 1), unique=True).map(tuple) if shape else st.none()))
    return a, axis, draw(st.booleans())


@SETTINGS
@given(cases(), st.sampled_from(NAMES))
def test_nan_reductions_match_numpy(case, name):
    a, axis, keepdims = case
    if name in ("nanargmax", "nanargmin") and isinstance(axis, tuple):
        axis = None
    f = getattr(np, name)
    want = outcome(lambda: f(a, axis=axis, keepdims=keepdims))
    t = lt.asarray(a)
    got = outcome(lambda: f(t, axis=axis, keepdims=keepdims).numpy())
    rtol = 1e-4 if a.dtype == np.float32 else 1e-9
    if name == "nanprod" and a.dtype.kind in "iu":
        rtol = 0                       # exact: integer products wrap the same way
    same(got, want, rtol)
    lazy = outcome(lambda: getattr(lt, name)(t, axis=axis, keepdims=keepdims).numpy())
    same(lazy, want, rtol)


@SETTINGS
@given(cases(), st.sampled_from(["nanvar", "nanstd"]), st.sampled_from([0, 1, 2]))
def test_nanvar_nanstd_take_ddof(case, name, ddof):
    a, axis, keepdims = case
    f = getattr(np, name)
    want = outcome(lambda: f(a, axis=axis, ddof=ddof, keepdims=keepdims))
    got = outcome(lambda: f(lt.asarray(a), axis=axis, ddof=ddof, keepdims=keepdims).numpy())
    same(got, want, 1e-4 if a.dtype == np.float32 else 1e-9)


@SETTINGS
@given(cases(), st.sampled_from(["nancumsum", "nancumprod"]))
def test_nan_scans_match_numpy(case, name):
    a, axis, _ = case
    axis = axis if not isinstance(axis, tuple) else None
    f = getattr(np, name)
    want = outcome(lambda: f(a, axis=axis))
    rtol = 1e-4 if a.dtype == np.float32 else 1e-9
    same(outcome(lambda: f(lt.asarray(a), axis=axis).numpy()), want, rtol)
    same(outcome(lambda: getattr(lt, name)(lt.asarray(a), axis=axis).numpy()), want, rtol)


def test_all_nan_slices_and_infinities():
    a = np.array([[np.nan, np.nan, np.nan], [np.nan, -np.inf, 1.0], [np.nan, np.inf, np.nan]])
    t = lt.asarray(a)
    for name in ("nanmax", "nanmin", "nanmean", "nansum", "nanprod", "nanvar"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = getattr(np, name)(a, axis=1)
        np.testing.assert_array_equal(getattr(np, name)(t, axis=1).numpy(), want)
    # The first -inf, not the NaN before it.
    assert int(np.nanargmax(lt.asarray(np.array([np.nan, -np.inf]))).item()) == 1
    np.testing.assert_array_equal(np.nanargmax(t[1:], axis=1).numpy(), np.nanargmax(a[1:], axis=1))
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        np.nanargmax(t, axis=1)
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        np.nanargmin(lt.asarray(np.full(3, np.nan)))


def test_dtype_and_out_keywords():
    a = np.array([[1.5, np.nan], [2.0, 4.0]], dtype=np.float32)
    t = lt.asarray(a)
    got = np.nansum(t, axis=0, dtype=np.float64)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got.numpy(), np.nansum(a, axis=0, dtype=np.float64))
    assert np.nanmean(t).dtype == np.nanmean(a).dtype == np.float32
    out = lt.zeros(2, np.float32)
    assert np.nanmax(t, axis=1, out=out) is out
    np.testing.assert_array_equal(out.numpy(), np.nanmax(a, axis=1))
    out = lt.zeros(2, np.float64)
    assert np.nanstd(t, axis=0, ddof=1, out=out) is out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(out.numpy(), np.nanstd(a, axis=0, ddof=1), equal_nan=True, rtol=1e-6)
    with pytest.raises(ValueError, match="out= has shape"):
        np.nansum(t, axis=0, out=lt.zeros(3))


def test_nan_reductions_stay_lazy_and_fuse():
    t = lt.asarray(np.array([1.0, np.nan, 3.0]))
    e = np.nansum(t * 2)
    assert isinstance(e, lt.Expr)
    assert float(e) == 8.0
