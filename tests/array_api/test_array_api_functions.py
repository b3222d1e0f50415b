"""The Array API's functions beyond the elementwise ones, in both namespaces (lt and lt.array_api), against
NumPy on hypothesis-drawn inputs: tensordot, vecdot, matrix_transpose, count_nonzero, searchsorted,
unique_*, diff, broadcast_arrays, meshgrid, unstack, tril/triu; and which of them stay lazy."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt
import lazytensor.array_api as xp
from lazytensor.testing.strategies import elements

SETTINGS = settings(max_examples=10, deadline=None)
REAL = ("int8", "uint64", "float32", "float64")
ALL = ("bool",) + REAL


def arrays(dtypes=ALL, min_dims=0, max_dims=3, min_side=0, max_side=4):
    return st.sampled_from(dtypes).flatmap(lambda d: hnp.arrays(
        d, hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side),
        elements=elements(d)))


def same(got, want):
    """Values, dtype and shape equal; NaN equal NaN and the sign of zero counts."""
    got = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_array_equal(got, want, strict=True)
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# -- products ----------------------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_tensordot_matches_numpy(data):
    dtype = data.draw(st.sampled_from(("int32", "int64", "float32", "float64")))
    a = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
                             elements=st.integers(-5, 5)))
    n = data.draw(st.integers(0, a.ndim))
    b_shape = a.shape[a.ndim - n:] + data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    b = data.draw(hnp.arrays(data.draw(st.sampled_from(("int8", "float32", "float64"))), b_shape,
                             elements=st.integers(-5, 5)))
    got = xp.tensordot(lt.asarray(a), lt.asarray(b), axes=n)
    assert isinstance(got, lt.Expr) or got.shape == ()
    np.testing.assert_allclose(got.numpy(), np.tensordot(a, b, axes=n), rtol=1e-5)
    assert got.dtype == np.result_type(a, b)


def test_tensordot_with_axis_pairs_and_errors():
    a, b = np.arange(24.0).reshape(2, 3, 4), np.arange(12.0).reshape(4, 3)
    np.testing.assert_allclose(lt.tensordot(lt.asarray(a), lt.asarray(b), axes=([1, 2], [1, 0])).numpy(),
                               np.tensordot(a, b, axes=([1, 2], [1, 0])))
    np.testing.assert_allclose(np.tensordot(lt.asarray(a), lt.asarray(b), axes=([2], [0])).numpy(),
                               np.tensordot(a, b, axes=([2], [0])))
    with pytest.raises(ValueError, match="shape-mismatch"):
        lt.tensordot(lt.asarray(a), lt.asarray(b), axes=([1], [0]))
    with pytest.raises(ValueError, match="between 0 and"):
        lt.tensordot(lt.asarray(a), lt.asarray(b), axes=3)


@SETTINGS
@given(st.data())
def test_vecdot_matches_numpy(data):
    dtype = data.draw(st.sampled_from(("uint8", "int64", "float64")))       # uint8 wraps, as NumPy's
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))
    other = data.draw(hnp.broadcastable_shapes(shape, min_dims=1, min_side=0))[:-1] + shape[-1:]
    x1 = data.draw(hnp.arrays(dtype, shape, elements=st.integers(-3, 3) if dtype[0] != "u" else st.integers(0, 5)))
    x2 = data.draw(hnp.arrays(dtype, other, elements=st.integers(0, 3)))
    got = xp.vecdot(lt.asarray(x1), lt.asarray(x2))
    assert isinstance(got, lt.Expr)
    same(got, np.vecdot(x1, x2))


def test_matrix_transpose_is_a_view():
    x = np.arange(24.0).reshape(2, 3, 4)
    t = lt.asarray(x)
    same(t.mT, x.mT)
    same(xp.matrix_transpose(t), np.matrix_transpose(x))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        lt.asarray(np.ones(3)).mT


# -- searching -----------------------------------------------------------------------------------------

@SETTINGS
@given(arrays(), st.data())
def test_count_nonzero_matches_numpy(x, data):
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1) if x.ndim else st.none())
    keepdims = data.draw(st.booleans())
    got = xp.count_nonzero(lt.asarray(x), axis=axis, keepdims=keepdims)
    assert isinstance(got, lt.Expr)
    same(got, np.asarray(np.count_nonzero(x, axis=axis, keepdims=keepdims), dtype=np.int64))


@SETTINGS
@given(st.sampled_from(REAL), st.data())
def test_searchsorted_matches_numpy(dtype, data):
    a = np.sort(data.draw(hnp.arrays(dtype, st.integers(0, 8), elements=elements(dtype))))
    v = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0), elements=elements(dtype)))
    side = data.draw(st.sampled_from(("left", "right")))
    same(xp.searchsorted(lt.asarray(a), lt.asarray(v), side=side), np.searchsorted(a, v, side=side).astype(np.int64))
    order = np.argsort(a[::-1], kind="stable")
    same(lt.searchsorted(lt.asarray(a[::-1]), lt.asarray(v), side=side, sorter=lt.asarray(order)),
         np.searchsorted(a[::-1], v, side=side, sorter=order).astype(np.int64))


def test_searchsorted_errors():
    with pytest.raises(ValueError, match="must be 1-D"):
        lt.searchsorted(lt.asarray(np.ones((2, 2))), 1.0)
    with pytest.raises(ValueError, match="'left' or 'right'"):
        lt.searchsorted(lt.asarray(np.ones(2)), 1.0, side="middle")


# -- sets: NaNs are distinct ------------------------------------------------------------------------------

@SETTINGS
@given(arrays(max_side=5))
def test_unique_functions_match_numpy(x):
    # The oracle is np.unique, which sorts (NumPy's unique_values need not, and since 2.3 does not).
    values, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                               equal_nan=False)
    index, inverse, counts = (a.astype(np.int64) for a in (index, inverse.reshape(x.shape), counts))
    t = lt.asarray(x)
    same(xp.unique_values(t), values)
    got = xp.unique_counts(t)
    same(got.values, values), same(got.counts, counts)
    got = xp.unique_inverse(t)
    same(got.values, values), same(got.inverse_indices, inverse)
    got = xp.unique_all(t)
    assert got._fields == ("values", "indices", "inverse_indices", "counts")
    same(got.values, values), same(got.indices, index), same(got.inverse_indices, inverse), same(got.counts, counts)


# -- diff, views, triangles --------------------------------------------------------------------------------

@SETTINGS
@given(arrays(min_dims=1), st.data())
def test_diff_matches_numpy(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = data.draw(st.integers(0, 3))
    edge = data.draw(st.none() | st.just("scalar") | st.just("array"))
    kwargs = {}
    if edge == "scalar":
        kwargs = {"prepend": x.dtype.type(1), "append": x.dtype.type(0)}
    elif edge == "array":
        kwargs = {"append": x}
    want = np.diff(x, n=n, axis=axis, **kwargs)
    got = xp.diff(lt.asarray(x), n=n, axis=axis, **{k: lt.asarray(v) if edge == "array" else v for k, v in kwargs.items()})
    same(got, want)


def test_diff_is_lazy_and_reads_x_at_most_four_times():
    x = np.arange(10.0) ** 3
    for n in (1, 2, 3, 6):
        e = lt.diff(lt.asarray(x), n=n)
        assert isinstance(e, lt.Expr)
        plan = str(lt.explain(e))
        assert "plan: 1 step" in plan and int(re.search(r"(\d+) array inputs", plan).group(1)) <= 4
        same(e, np.diff(x, n=n))


@SETTINGS
@given(arrays(("bool", "int8", "float64"), min_dims=2, max_dims=3), st.integers(-3, 3))
def test_tril_triu_match_numpy(x, k):
    same(xp.tril(lt.asarray(x), k=k), np.tril(x, k))
    same(xp.triu(lt.asarray(x), k=k), np.triu(x, k))


def test_broadcast_arrays_meshgrid_unstack():
    a, b = np.arange(3.0), np.arange(2, dtype=np.float64).reshape(2, 1)
    for got, want in zip(xp.broadcast_arrays(lt.asarray(a), lt.asarray(b)), np.broadcast_arrays(a, b)):
        same(got, want)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        xp.broadcast_arrays(lt.asarray(np.ones(3)), lt.asarray(np.ones(4)))
    for indexing in ("xy", "ij"):
        g = xp.meshgrid(*(lt.asarray(np.arange(n, dtype=np.int32)) for n in (3, 2, 4)), indexing=indexing)
        for got, want in zip(g, np.meshgrid(*(np.arange(n, dtype=np.int32) for n in (3, 2, 4)), indexing=indexing)):
            same(got, want)
    x = np.arange(24).reshape(2, 3, 4)
    for axis in (0, 1, -1):
        got = xp.unstack(lt.asarray(x), axis=axis)
        assert len(got) == x.shape[axis]
        for g, w in zip(got, np.unstack(x, axis=axis)):
            same(g, w)


def test_numpy_functions_dispatch_to_the_lazy_ones():
    t = lt.asarray(np.arange(6.0).reshape(2, 3))
    for f in (np.tril, np.triu, np.diff):
        assert isinstance(f(t), lt.Expr)
    assert np.matrix_transpose(t).shape == (3, 2)
    assert isinstance(np.count_nonzero(t), lt.Expr)
    assert isinstance(np.unique_values(t), lt.Tensor)


# -- the namespace's inspection and array attributes -----------------------------------------------------

def test_inspection_namespace():
    info = xp.__array_namespace_info__()
    assert info.capabilities()["boolean indexing"] and info.capabilities()["data-dependent shapes"]
    assert info.default_device() in info.devices() and "cpu" in info.devices()
    assert info.default_dtypes()["real floating"] == np.float64 and info.default_dtypes()["indexing"] == np.int64
    assert set(info.dtypes()) == {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                  "float32", "float64", "complex64", "complex128"}
    assert set(info.dtypes(kind="complex floating")) == {"complex64", "complex128"}
    assert info.default_dtypes()["complex floating"] == np.complex128
    assert set(info.dtypes(kind=("bool", "real floating"))) == {"bool", "float32", "float64"}
    with pytest.raises(ValueError, match="unknown dtype kind"):
        info.dtypes(kind="complex")


def test_asarray_copy_and_index():
    a = np.arange(3.0)
    t = xp.asarray(a, copy=True)
    a[0] = 9
    assert t.numpy()[0] == 0
    assert xp.asarray(t, copy=False) is t and xp.asarray(t, copy=True).data is not t.data
    with pytest.raises(ValueError, match="copy=False"):
        xp.asarray([1, 2], copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        xp.asarray(t, dtype=xp.float32, copy=False)
    assert [10, 20, 30][lt.asarray(np.array(2))] == 30
    with pytest.raises(TypeError, match="0-d integer"):
        [1][lt.asarray(np.array(0.0))]
    assert t.to_device("cpu") is t


def test_from_dlpack_shares_memory():
    a = np.arange(4.0)
    t = xp.from_dlpack(a)
    assert isinstance(t, lt.Tensor) and t.device == "cpu"
    a[0] = 7.0
    assert t.numpy()[0] == 7.0                      # no copy
    c = xp.from_dlpack(t, copy=True)
    a[1] = 9.0
    assert c.numpy()[1] == 1.0
