"""Views vs NumPy: basic indexing, transposes, reshapes, broadcasts, of tensors and of expressions.

A view of a Tensor must be a NumPy-style strided view of the same memory (no copy: writing through
it changes the base); a view of an expression must fuse into the consumer kernel (one launch);
a reshape that no strided view can express must say so in lt.explain (a materialize step whose
note says why), exactly when NumPy's own reshape has to copy. Values are compared exactly: views
move elements, they compute nothing, and `* 2 + 1` on float64 is exact in both.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _array(shape, seed=0, dtype=np.float64):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float64) * 1.5 - seed).astype(dtype).reshape(shape)


# -- strategies --------------------------------------------------------------------------------------

shapes = st.lists(st.sampled_from([1, 2, 3, 4, 5, 0]), min_size=0, max_size=3).map(tuple)
nonempty_shapes = st.lists(st.sampled_from([1, 2, 3, 4, 5]), min_size=1, max_size=3).map(tuple)


@st.composite
def basic_keys(draw, shape):
    """A basic-indexing key for `shape`: ints (negative too), slices (any start/stop, steps of
    either sign), None, Ellipsis, in combination; trailing dims may be left implicit."""
    items = []
    for d in shape:
        if d > 0 and draw(st.integers(0, 3)) == 0:
            items.append(draw(st.integers(-d, d - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-d - 2, d + 2))
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))))
    if items and draw(st.booleans()):
        lo = draw(st.integers(0, len(items)))
        hi = draw(st.integers(lo, len(items)))
        items[lo:hi] = [Ellipsis]
    elif items and draw(st.booleans()):
        items = items[:draw(st.integers(0, len(items)))]        # trailing dims implicit
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


@st.composite
def shape_and_key(draw, shapes=shapes):
    shape = draw(shapes)
    return shape, draw(basic_keys(shape))


@st.composite
def factorization(draw, size):
    """A shape with `size` elements (1 to 4 dims; -1 sometimes)."""
    dims = []
    rest = size
    for _ in range(draw(st.integers(0, 3))):
        divisors = [k for k in range(1, rest + 1) if rest % k == 0] if rest else [0, 1, 2]
        k = draw(st.sampled_from(divisors))
        dims.append(k)
        rest = rest // k if k else rest
    dims.append(rest if size else 0 if 0 not in dims else draw(st.sampled_from([0, 1, 3])))
    if size and draw(st.integers(0, 3)) == 0:
        dims[draw(st.integers(0, len(dims) - 1))] = -1
    return tuple(draw(st.permutations(dims)))


# -- basic indexing ------------------------------------------------------------------------------------

@SETTINGS
@given(shape_and_key())
def test_indexing_a_tensor_is_a_view_of_its_memory(case):
    shape, key = case
    x = _array(shape)
    t = lt.asarray(x)
    v = t[key]
    expected = x[key]
    assert isinstance(v, lt.Tensor)
    assert v.shape == expected.shape and v.dtype == expected.dtype
    np.testing.assert_array_equal(v.numpy(), expected)
    if v.size:
        assert np.shares_memory(v.data, x), "a view of a tensor must not copy"
        # writing through the view changes the base, as writing through NumPy's view does
        v[...] = v * 2 + 1
        x2 = _array(shape)
        x2[key] = x2[key] * 2 + 1
        np.testing.assert_array_equal(x, x2)
        np.testing.assert_array_equal(t.numpy(), x2)


@SETTINGS
@given(shape_and_key(shapes=nonempty_shapes), st.booleans())
def test_indexing_an_expression(case, broadcast):
    shape, key = case
    a, b = _array(shape, 1), _array(shape[-1:] if broadcast else shape, 7)
    expr = lt.asarray(a) * 2 + lt.asarray(b)
    expected = (a * 2 + b)[key]
    v = expr[key]
    assert v.shape == expected.shape and v.dtype == expected.dtype
    with lt.profile() as p:
        got = v.numpy()
    assert p.launches == 1, "a view of an expression fuses into the consumer's kernel"
    np.testing.assert_array_equal(got, expected)


def test_indexing_combinations_and_errors():
    x = _array((4, 5, 6))
    t = lt.asarray(x)
    for key in [(1, slice(None, None, -2), None, Ellipsis, -1), (Ellipsis, None), (None, Ellipsis, 2),
                (slice(3, 0, -1), slice(-1, None, -3)), -4, (np.int64(2), np.int32(-1)), ()]:
        np.testing.assert_array_equal(t[key].numpy(), x[key])
        np.testing.assert_array_equal((t + 0)[key].numpy(), x[key])
    with pytest.raises(IndexError, match="out of bounds"):
        t[4]
    with pytest.raises(IndexError, match="out of bounds"):
        (t + 1)[:, -6]
    with pytest.raises(IndexError, match="too many indices"):
        t[1, 1, 1, 1]
    gathered = lt.evaluate(t[[0, 1]])   # advanced indexing is not a view: a (lazy) gather into new memory
    np.testing.assert_array_equal(gathered.numpy(), x[[0, 1]])
    assert not np.shares_memory(gathered.data, t.data)
    with pytest.raises(IndexError):
        t[..., ...]


# -- transposes ----------------------------------------------------------------------------------------

@SETTINGS
@given(nonempty_shapes, st.data())
def test_transposes(shape, data):
    x = _array(shape)
    t = lt.asarray(x)
    nd = len(shape)
    perm = tuple(data.draw(st.permutations(range(nd))))
    neg = tuple(p - nd if data.draw(st.booleans()) else p for p in perm)
    a1, a2 = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
    k = data.draw(st.integers(1, nd))
    src = tuple(data.draw(st.permutations(range(nd))))[:k]
    dst = tuple(data.draw(st.permutations(range(-nd, 0))))[:k]
    cases = [(t.T, x.T), (t.transpose(neg), x.transpose(neg)), (t.transpose(*perm), x.transpose(*perm)),
             (lt.transpose(t, perm), np.transpose(x, perm)), (t.swapaxes(a1, a2), x.swapaxes(a1, a2)),
             (lt.swapaxes(t, a1, a2), np.swapaxes(x, a1, a2)), (lt.moveaxis(t, src, dst), np.moveaxis(x, src, dst)),
             (lt.moveaxis(t, src[0], dst[0]), np.moveaxis(x, src[0], dst[0]))]
    for ours, expected in cases:
        assert isinstance(ours, lt.Tensor) and np.shares_memory(ours.data, x)
        np.testing.assert_array_equal(ours.numpy(), expected)
    e = lt.asarray(x) - 3
    np.testing.assert_array_equal(lt.moveaxis(e, src, dst).numpy(), np.moveaxis(x - 3, src, dst))
    np.testing.assert_array_equal(e.transpose(neg).numpy(), (x - 3).transpose(neg))


def test_transpose_errors():
    t = lt.asarray(_array((2, 3, 4)))
    with pytest.raises(ValueError, match="don't match"):
        t.transpose(0, 0, 1)
    with pytest.raises(ValueError):
        t.transpose(0, 1)


# -- reshape: a view when strides allow, else materialized (and explain says why) ------------------

VIEW_OPS = {
    "contiguous": lambda a: a,
    "T": lambda a: a.T,
    "step": lambda a: a[::2],
    "inner slice": lambda a: a[..., 1:],
    "reversed": lambda a: a[::-1],
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([1, 2, 3, 4, 6]), min_size=1, max_size=3).map(tuple),
       st.sampled_from(sorted(VIEW_OPS)), st.data())
def test_reshape_of_a_tensor_view(shape, op, data):
    x = _array(shape)
    xv = VIEW_OPS[op](x)
    newshape = data.draw(factorization(xv.size))
    expected = xv.reshape(newshape)
    numpy_copies = expected.size > 0 and not np.shares_memory(expected, x)
    tv = VIEW_OPS[op](lt.asarray(x))
    ours = tv.reshape(newshape)
    assert ours.shape == expected.shape
    text = lt.explain(ours, source=False)
    if numpy_copies:
        assert "materialize" in text and "the tensor's strides do not allow this reshape as a view" in text, text
    else:
        assert "materialize" not in text, text
        assert isinstance(ours, lt.Tensor)
        if ours.size:
            assert np.shares_memory(ours.data, x)
    np.testing.assert_array_equal(ours.numpy(), expected)
    np.testing.assert_array_equal(lt.reshape(tv, newshape).numpy(), expected)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=3).map(tuple),
       st.sampled_from(sorted(VIEW_OPS)), st.booleans(), st.data())
def test_reshape_of_an_expression(shape, op, broadcast, data):
    a = _array(shape, 2)
    b = _array(shape[-1:] if broadcast else shape, 5)
    e_np = VIEW_OPS[op](a + b * 0.5)
    newshape = data.draw(factorization(e_np.size))
    expr = VIEW_OPS[op](lt.asarray(a) + lt.asarray(b) * 0.5).reshape(newshape)
    text = lt.explain(expr, source=False)
    if "materialize" in text:
        assert "an operand's strides do not allow this reshape as a view" in text, text
    else:
        assert "plan: 1 step\n" in text, text
    np.testing.assert_array_equal(expr.numpy(), e_np.reshape(newshape))


def test_reshape_view_and_copy_examples():
    x = _array((4, 6))
    t = lt.asarray(x)
    r = t.reshape(2, 12)
    assert "materialize" not in lt.explain(r, source=False) and np.shares_memory(r.data, x)
    r = t.T.reshape(24)
    text = lt.explain(r, source=False)
    assert "materialize" in text and "strides do not allow this reshape" in text
    np.testing.assert_array_equal(r.numpy(), x.T.reshape(24))
    np.testing.assert_array_equal((t.T.reshape(-1) + 1).numpy(), x.T.reshape(-1) + 1)
    r = t[:, ::2].reshape(4, 3, 1)          # strided but splittable: a view
    assert "materialize" not in lt.explain(r, source=False) and np.shares_memory(r.data, x)
    with pytest.raises(ValueError, match="cannot reshape array of size 24 into shape"):
        t.reshape(5, 5)
    with pytest.raises(ValueError, match="one unknown dimension"):
        t.reshape(-1, -1)


# -- broadcast_to, expand_dims, squeeze, ravel -------------------------------------------------------

@SETTINGS
@given(st.lists(st.sampled_from([1, 2, 3]), min_size=0, max_size=3).map(tuple), st.data())
def test_broadcast_expand_squeeze_ravel(shape, data):
    x = _array(shape)
    t = lt.asarray(x)
    e, e_np = t * 3 - 1, x * 3 - 1
    nd = len(shape)
    # broadcast_to: leading dims, and 1s stretched
    target = tuple(data.draw(st.lists(st.sampled_from([1, 2, 4]), max_size=2))) + \
        tuple(data.draw(st.sampled_from([1, 3])) if d == 1 else d for d in shape)
    ax = data.draw(st.integers(-(nd + 1), nd))
    two = tuple(data.draw(st.permutations(range(nd + 2))))[:2]
    ones = [i for i, d in enumerate(shape) if d == 1]
    sq = tuple(data.draw(st.permutations(ones)))[:data.draw(st.integers(0, len(ones)))]
    for ours, np_x, is_tensor in ((t, x, True), (e, e_np, False)):
        cases = [(lt.broadcast_to(ours, target), np.broadcast_to(np_x, target)),
                 (lt.expand_dims(ours, ax), np.expand_dims(np_x, ax)),
                 (lt.expand_dims(ours, two), np.expand_dims(np_x, two)),
                 (lt.squeeze(ours), np.squeeze(np_x)), (ours.squeeze(), np.squeeze(np_x)),
                 (lt.squeeze(ours, sq), np.squeeze(np_x, sq)),
                 (lt.ravel(ours), np.ravel(np_x)), (ours.ravel(), np_x.ravel())]
        for got, expected in cases:
            assert got.shape == expected.shape
            if is_tensor:
                assert isinstance(got, lt.Tensor)
                assert got.size == 0 or np.shares_memory(got.data, x)
            np.testing.assert_array_equal(got.numpy(), expected)
    if any(d != 1 for d in shape):
        with pytest.raises(ValueError, match="size not equal to one"):
            lt.squeeze(t, [i for i, d in enumerate(shape) if d != 1][0])
    if any(d != 1 for d in shape):
        with pytest.raises(ValueError):
            lt.broadcast_to(t, tuple(d + 1 for d in shape))


# -- views of expressions fuse -----------------------------------------------------------------------

def test_views_of_expressions_are_one_kernel():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 6)), rng.standard_normal((8, 6))
    ta, tb = lt.asarray(a), lt.asarray(b)
    for expr, expected in (((ta + tb)[::2], (a + b)[::2]), ((ta * tb).T, (a * b).T),
                           ((ta - tb)[::-1, 1::2].T[None], (a - b)[::-1, 1::2].T[None]),
                           (lt.sqrt(lt.abs(ta * tb)).reshape(4, 12), np.sqrt(np.abs(a * b)).reshape(4, 12))):
        text = lt.explain(expr, source=False)
        assert "plan: 1 step\n" in text and "materialize" not in text, text
        with lt.profile() as p:
            got = expr.numpy()
        assert p.launches == 1, p
        np.testing.assert_array_equal(got, expected)


def test_view_of_a_reduction_result():
    x = _array((5, 4))
    t = lt.asarray(x)
    np.testing.assert_array_equal(t.sum(axis=0)[1:].numpy(), x.sum(axis=0)[1:])
    np.testing.assert_array_equal(t.sum(axis=0, keepdims=True).T.numpy(), x.sum(axis=0, keepdims=True).T)
    expr = t - t.max(axis=1)[:, None]
    text = lt.explain(expr, source=False)
    assert "plan: 2 steps" in text, text
    np.testing.assert_array_equal(expr.numpy(), x - x.max(axis=1)[:, None])


# -- assignment into views ---------------------------------------------------------------------------

def test_assignment_into_views():
    rng = np.random.default_rng(3)
    y = rng.standard_normal((6, 5))
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal((5, 6))
    c = rng.standard_normal(5)
    ty, ta, tb, tc = (lt.asarray(v.copy()) for v in (y, a, b, c))
    base = ty.data

    ty[::2, 1:] = ta * 2 + 1
    y[::2, 1:] = a * 2 + 1
    np.testing.assert_array_equal(ty.numpy(), y)

    ty.T[...] = tb - 0.5
    y.T[...] = b - 0.5
    np.testing.assert_array_equal(ty.numpy(), y)

    ty[3] += tc * tc
    y[3] += c * c
    np.testing.assert_array_equal(ty.numpy(), y)

    ty[::-2, ::-1] = 7.0
    y[::-2, ::-1] = 7.0
    ty[-1, 2] = tc[0] + 1
    y[-1, 2] = c[0] + 1
    ty[:, None, 1] = tc[:, None][:1]            # broadcast along the destination's rows
    y[:, None, 1] = c[:, None][:1]
    np.testing.assert_array_equal(ty.numpy(), y)
    assert ty.data is base                      # all of it written in place


@SETTINGS
@given(shape_and_key(shapes=nonempty_shapes))
def test_drawn_assignment_into_a_view(case):
    shape, key = case
    y = _array(shape, 3)
    dest = y[key]
    src = np.arange(dest.size, dtype=np.float64).reshape(dest.shape) * -0.25
    ty = lt.asarray(y.copy())
    ty[key] = lt.asarray(src) * 4 + 2
    y[key] = src * 4 + 2
    np.testing.assert_array_equal(ty.numpy(), y)
