"""NumPy's functions built from lazytensor's nodes, called as np.<name>(tensor) and lt.<name>,
against NumPy on the host: order statistics, average/ptp, isclose/allclose/array_equal, the *_like
constructors and copy, atleast_nd/split, diagonal/trace/diag, pad, dot/inner/outer/einsum,
unique/bincount/argwhere/histogram/isin; with odd shapes, 0-d, empty, NaN/inf and NumPy's keywords."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt

SETTINGS = settings(max_examples=12, deadline=None)
FLOATS = st.one_of(st.sampled_from([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5]), st.floats(-8, 8))


def host(x):
    if isinstance(x, (tuple, list)):
        return type(x)(host(v) for v in x)
    return x.numpy() if isinstance(x, (lt.Tensor, lt.Expr)) else x


def check(f, *args, lazy=True, rtol=1e-12, **kwargs):
    """f on host arrays and on tensors (through NumPy's protocol and as lt.<name>): equal values,
    shapes and dtypes, or the same exception type."""
    def run(g, convert):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return host(g(*(convert(a) for a in args), **kwargs))
            except (ValueError, TypeError, IndexError, ZeroDivisionError, np.exceptions.AxisError) as e:
                return type(e)
    want = run(f, lambda a: a)
    def tensor(a):
        return (lt.asarray(a) if isinstance(a, np.ndarray) else a)
    for g in (f, getattr(lt, f.__name__)):
        compare(run(g, tensor), want, rtol)
    return want


def compare(got, want, rtol):
    if isinstance(want, type):
        assert got is want or (isinstance(got, type) and issubclass(got, want)), (got, want)
        return
    assert not isinstance(got, type), f"lazytensor raised {got.__name__}; NumPy gave {want!r}"
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            compare(g, w, rtol)
        return
    if type(want) is bool:                 # allclose, array_equal: Python bools, as NumPy's
        assert type(got) is bool and got == want
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


@st.composite
def float_arrays(draw, min_dims=0, max_dims=3, min_side=0):
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=4))
    return draw(hnp.arrays(np.float64, shape, elements=FLOATS))


def axes(ndim):
    if ndim == 0:
        return st.none()
    return st.one_of(st.none(), st.integers(-ndim, ndim - 1),
                     st.lists(st.integers(0, ndim - 1), min_size=1, unique=True).map(tuple))


# -- order statistics -----------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_median_quantile_percentile(data):
    a = data.draw(float_arrays())
    axis, keepdims = data.draw(axes(a.ndim)), data.draw(st.booleans())
    check(np.median, a, axis=axis, keepdims=keepdims)
    check(np.nanmedian, a, axis=axis, keepdims=keepdims)
    q = data.draw(st.one_of(st.floats(0, 1), st.lists(st.floats(0, 1), min_size=1, max_size=3).map(np.array)))
    method = data.draw(st.sampled_from(["linear", "lower", "higher", "nearest", "midpoint"]))
    check(np.quantile, a, q, axis=axis, keepdims=keepdims, method=method)
    check(np.nanquantile, a, q, axis=axis, keepdims=keepdims, method=method)
    check(np.percentile, a, np.asarray(q) * 100, axis=axis, keepdims=keepdims, method=method)


def test_order_statistics_errors_and_integers():
    check(np.quantile, np.arange(5), 1.5)
    check(np.median, np.arange(7, dtype=np.int8))
    check(np.percentile, np.arange(6.0).reshape(2, 3), [10, 90], axis=1)


# -- average, ptp, closeness ----------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_average_and_ptp(data):
    a = data.draw(float_arrays(min_dims=1, min_side=1))
    axis = data.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1)))
    keepdims = data.draw(st.booleans())
    check(np.average, a, axis=axis, keepdims=keepdims)
    check(np.ptp, a, axis=axis, keepdims=keepdims)
    w = data.draw(hnp.arrays(np.float64, a.shape, elements=st.floats(0, 3)))
    check(np.average, a, axis=axis, weights=w, keepdims=keepdims, rtol=1e-9)
    check(np.average, a, axis=axis, weights=w, returned=True, rtol=1e-9)


def test_average_weights_along_an_axis():
    a = np.arange(12.0).reshape(3, 4)
    check(np.average, a, axis=1, weights=np.array([1.0, 2, 3, 4]))
    check(np.average, a, axis=0, weights=np.array([1.0, 0, 2]), returned=True)
    check(np.average, a, axis=(1, 0), weights=np.arange(12.0).reshape(4, 3))
    check(np.average, np.arange(3), weights=np.array([1, 2, 3]))
    check(np.average, a, weights=np.array([1.0, 2, 3, 4]))                       # TypeError: axis needed
    check(np.average, a, axis=1, weights=np.zeros(4))                            # ZeroDivisionError
    check(np.average, a, axis=1, weights=np.ones(3))                             # ValueError


@SETTINGS
@given(st.data())
def test_isclose_allclose_array_equal(data):
    a = data.draw(float_arrays())
    b = data.draw(hnp.arrays(np.float64, a.shape, elements=FLOATS))
    b = np.where(data.draw(hnp.arrays(bool, a.shape)), a, b)         # some equal elements
    equal_nan = data.draw(st.booleans())
    check(np.isclose, a, b, equal_nan=equal_nan)
    check(np.isclose, a, b, rtol=0.5, atol=0.1)
    check(np.allclose, a, b, equal_nan=equal_nan)
    check(np.array_equal, a, b, equal_nan=equal_nan)
    check(np.array_equal, a, a, equal_nan=equal_nan)
    check(np.isclose, a.astype(np.float32), 1)


def test_closeness_shapes_and_kinds():
    check(np.array_equal, np.arange(3), np.arange(4))
    check(np.array_equal, np.arange(3), np.arange(3.0))
    check(np.isclose, np.arange(4, dtype=np.int8), np.arange(4, dtype=np.uint8))
    check(np.allclose, np.array([np.inf, 1.0]), np.array([np.inf, 1.0 + 1e-9]))
    assert isinstance(lt.isclose(lt.asarray(np.ones(2)), 1.0), lt.Expr)


# -- constructors and copy ------------------------------------------------------------------------

def test_like_constructors_and_copy():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    t = lt.asarray(a)
    for f in (np.zeros_like, np.ones_like):
        compare(host(f(t * 2)), f(a * 2), 0)
        compare(host(f(t, dtype=np.float32, shape=(4,))), f(a, dtype=np.float32, shape=(4,)), 0)
    compare(host(np.full_like(t, 2.7)), np.full_like(a, 2.7), 0)
    compare(host(np.full_like(t + 0.5, np.nan)), np.full_like(a + 0.5, np.nan), 0)
    e = np.empty_like(t, dtype=np.float64)
    assert isinstance(e, lt.Tensor) and e.shape == a.shape and e.dtype == np.float64
    with pytest.raises(ValueError, match="C-contiguous"):
        np.zeros_like(t, order="F")
    c = np.copy(t)
    assert isinstance(c, lt.Tensor) and c is not t and c.data is not t.data
    c[0, 0] = 99
    assert int(t[0, 0].item()) == 0
    compare(host(np.copy(t * 3)), a * 3, 0)
    compare(host(lt.copy(lt.asarray(np.array([-0.0, np.nan])))), np.array([-0.0, np.nan]), 0)
    assert np.signbit(lt.copy(lt.asarray(np.array([-0.0]))).numpy()[0])


# -- shapes: atleast, split ------------------------------------------------------------------------

def test_atleast_nd():
    for a in (np.float64(2.0), np.arange(3.0), np.ones((2, 3)), np.ones((2, 1, 3, 1))):
        x = np.asarray(a)
        for f in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
            compare(host(lt.__dict__[f.__name__](lt.asarray(x))), f(x), 0)
            compare(host(f(lt.asarray(x))), f(x), 0)
    both = np.atleast_2d(lt.asarray(np.ones(2)), lt.asarray(np.ones(3)))
    assert isinstance(both, tuple) and [b.shape for b in both] == [(1, 2), (1, 3)]


@SETTINGS
@given(st.data())
def test_split_and_array_split(data):
    a = data.draw(float_arrays(min_dims=1))
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    sections = data.draw(st.one_of(st.integers(-1, 5), st.lists(st.integers(-6, 6), max_size=3)))
    check(np.array_split, a, sections, axis=axis)
    check(np.split, a, sections, axis=axis)


def test_split_views_write_through_like_numpys():
    t = lt.asarray(np.arange(6.0))
    parts = np.split(t, 3)
    parts[1][...] = 9.0                          # a view of t, as NumPy's parts are
    np.testing.assert_array_equal(t.numpy(), [0, 1, 9, 9, 4, 5])
    check(np.split, np.arange(7.0), 3)          # not an equal division
    check(np.array_split, np.arange(7.0), 0)


# -- diagonals ---------------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_diagonal_trace_diag(data):
    a = data.draw(float_arrays(min_dims=2, max_dims=4))
    offset = data.draw(st.integers(-5, 5))
    axis1, axis2 = data.draw(st.lists(st.integers(-a.ndim, a.ndim - 1), min_size=2, max_size=2))
    check(np.diagonal, a, offset, axis1, axis2)
    check(np.trace, a, offset, axis1, axis2, rtol=1e-9)
    v = data.draw(hnp.arrays(np.int16, st.integers(0, 4), elements=st.integers(-5, 5)))
    check(np.diag, v, offset)
    check(np.diag, a.reshape(int(np.prod(a.shape[:-1])), a.shape[-1]), offset)
    check(np.trace, np.arange(9, dtype=np.int8).reshape(3, 3), dtype=np.int8)


# -- pad --------------------------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_pad_modes(data):
    a = data.draw(float_arrays(min_dims=1, max_dims=3, min_side=1))
    width = data.draw(st.one_of(st.integers(0, 3), st.tuples(st.integers(0, 3), st.integers(0, 3)),
                                st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=a.ndim,
                                         max_size=a.ndim)))
    mode = data.draw(st.sampled_from(["constant", "edge", "reflect", "symmetric", "wrap", "maximum"]))
    kwargs = {"constant_values": data.draw(st.sampled_from([0, 1.5, ((1, 2),)]))} if mode == "constant" else {}
    check(np.pad, a, width, mode, **kwargs)


def test_pad_is_lazy_and_a_new_array():
    t = lt.asarray(np.arange(4.0))
    assert isinstance(np.pad(t, 2), lt.Expr) and np.pad(t, 0) is not t
    check(np.pad, np.arange(4), 1, constant_values=2.7)
    check(np.pad, np.arange(4), -1)
    check(np.pad, np.zeros((0, 2)), 1, "edge")


# -- products -----------------------------------------------------------------------------------

PRODUCTS = [((3, 4), (4, 5)), ((4,), (4,)), ((3, 4), (4,)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (4,)),
            ((), (3, 2)), ((2, 3, 4), (5, 4, 2)), ((4,), (4, 3)), ((3, 4), (5, 4)), ((0, 2), (2, 3))]


@pytest.mark.parametrize("shapes", PRODUCTS)
def test_dot_inner_outer(shapes):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s) for s in shapes)
    check(np.dot, a, b, rtol=1e-9)
    bt = np.swapaxes(b, -1, -2) if b.ndim > 1 else b
    check(np.inner, a, bt, rtol=1e-9)
    check(np.outer, a, b, rtol=1e-9)
    check(np.dot, a.astype(np.int32), b.astype(np.int8))


@SETTINGS
@given(st.data())
def test_dot_inner_outer_over_drawn_shapes(data):
    k = data.draw(st.integers(0, 3))
    a_shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3).map(
        lambda s: s[:-1] + (k,) if s else s))
    b_lead = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    b_shape = (k,) if data.draw(st.booleans()) or not b_lead else b_lead[:-1] + (k,) + b_lead[-1:]
    dtype = data.draw(st.sampled_from([np.float64, np.float32, np.int16]))
    a = data.draw(hnp.arrays(dtype, a_shape, elements=st.integers(-4, 4)))
    b = data.draw(hnp.arrays(dtype, b_shape, elements=st.integers(-4, 4)))
    check(np.dot, a, b, rtol=1e-6)
    check(np.inner, a, np.swapaxes(b, -1, -2) if b.ndim > 1 else b, rtol=1e-6)
    check(np.outer, a, b, rtol=1e-6)


EINSUMS = [("ij,jk->ik", (3, 4), (4, 5)), ("ij,jk,kl->il", (3, 4), (4, 5), (5, 2)), ("ii->i", (4, 4)),
           ("ii", (3, 3)), ("ij->ji", (3, 4)), ("ij->", (3, 4)), ("i,i", (4,), (4,)), ("i,j->ij", (3,), (2,)),
           ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)), ("...ij,jk->...ik", (2, 3, 4), (4, 5)), ("...j,j", (2, 3), (3,)),
           ("ij,ij->ij", (3, 4), (3, 4)), ("kji", (2, 3, 4)), ("ij,jk", (2, 3), (3, 2)), ("iij->ji", (3, 3, 2)),
           ("ij,kl->ijkl", (2, 3), (2, 2)), ("i,i,i->", (3,), (3,), (3,)), ("...,...", (2, 1), (3,)),
           ("ab,bc,cd,de->ae", (2, 3), (3, 4), (4, 2), (2, 3)), ("ij,j->", (0, 3), (3,)), ("i->i", (1,)),
           ("ijk,ikj->i", (2, 3, 3), (2, 3, 3)), ("ij,ij->i", (2, 1), (2, 3)), ("ij,jk->ik", (2, 1), (3, 2)),
           (",->", (), ())]


@pytest.mark.parametrize("case", EINSUMS, ids=[c[0] for c in EINSUMS])
def test_einsum(case):
    rng = np.random.default_rng(1)
    subscripts, *shapes = case
    arrays = [rng.standard_normal(s) for s in shapes]
    check(np.einsum, subscripts, *arrays, rtol=1e-9)
    check(np.einsum, subscripts, *(a.round().astype(np.int8) for a in arrays))


def test_einsum_forms_and_errors():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    check(np.einsum, a, [0, 1], b, [1, 2], [0, 2])
    check(np.einsum, "ij,jk->ik", a, b, dtype=np.float32, casting="same_kind")
    check(np.einsum, "ij,jk->ik", a, b, dtype=np.int32)           # TypeError: not a safe cast
    check(np.einsum, "ij,jk->ik", a, a)                            # ValueError: sizes differ
    check(np.einsum, "ij->k", a)
    check(np.einsum, "ij,j->i", a.astype(bool), np.ones(3, bool))
    out = lt.zeros((2, 4))
    assert np.einsum("ij,jk->ik", lt.asarray(a), lt.asarray(b), out=out) is out
    np.testing.assert_allclose(out.numpy(), a @ b)


# -- data-dependent shapes and isin -------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_unique_argwhere_histogram(data):
    a = data.draw(hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=5),
                             elements=st.sampled_from([np.nan, 0.0, -0.0, 1.0, 2.5, -1.0])))
    flags = data.draw(st.fixed_dictionaries({"return_index": st.booleans(), "return_inverse": st.booleans(),
                                             "return_counts": st.booleans(), "equal_nan": st.booleans()}))
    check(np.unique, a, **flags)
    check(np.argwhere, a)
    finite = np.nan_to_num(a.ravel(), nan=0.5)
    check(np.histogram, finite, bins=data.draw(st.sampled_from([3, 10, [-1.0, 0.0, 2.0, 3.0]])))
    check(np.histogram, finite, bins=4, range=(-2, 2), density=True)


def test_unique_axis_and_bincount():
    a = np.array([[1, 2], [3, 4], [1, 2]])
    check(np.unique, a, axis=0, return_counts=True)
    x = np.array([0, 3, 3, 1, 7])
    check(np.bincount, x)
    check(np.bincount, x, minlength=10)
    check(np.bincount, x, weights=np.linspace(0, 1, 5))
    check(np.bincount, np.array([1, -1]))


@SETTINGS
@given(st.data())
def test_isin(data):
    a = data.draw(hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
                             elements=st.sampled_from([np.nan, 0.0, -0.0, 1.0, 2.0, 3.0, np.inf])))
    test = data.draw(st.one_of(st.lists(st.sampled_from([np.nan, 0.0, 1.0, 5.0, np.inf]), max_size=5).map(np.array),
                               st.just(np.arange(100.0))))
    invert = data.draw(st.booleans())
    check(np.isin, a, test, invert=invert)
    check(np.isin, a.astype(np.int64) if np.isfinite(a).all() else a, test.astype(np.float32), invert=invert)


def test_isin_is_lazy_against_few_values():
    t = lt.asarray(np.arange(5))
    assert isinstance(np.isin(t, [1, 3]), lt.Expr)
    assert isinstance(np.isin(t, np.arange(200)), lt.Tensor)
    check(np.isin, np.arange(5), np.arange(5), kind="bogus")
