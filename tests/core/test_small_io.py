"""Single items and small slices of CPU tensors (lazytensor.assign.small_io, core.view_steps.int_view):
the same values, dtypes, errors and aliasing as NumPy, under the 'same_kind' rule of every
assignment, in both tiers; expressions built before a write keep their values."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lazytensor as lt
from tests.support.tiers import compiled_tier, interpreter_tier

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int32, np.int64, np.bool_]
TIERS = {"compiled": compiled_tier, "interpreter": interpreter_tier}


@pytest.fixture(params=sorted(TIERS))
def tier(request):
    with TIERS[request.param]():
        yield request.param


def _index(draw, shape):
    """A basic index of `shape`: ints (negative too, one out of bounds at times), slices, Ellipsis, None."""
    items = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "all"]))
        if kind == "int":
            items.append(draw(st.integers(-n - 1, n)))
        elif kind == "slice":
            items.append(slice(draw(st.none() | st.integers(-n - 1, n + 1)), draw(st.none() | st.integers(-n - 1, n + 1)),
                               draw(st.sampled_from([None, 1, 2, -1]))))
        else:
            items.append(slice(None))
    if draw(st.booleans()) and items:
        items = items[:draw(st.integers(0, len(items)))] + [Ellipsis]
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), None)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


@st.composite
def writes(draw):
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=3)))
    key = _index(draw, shape) if shape else draw(st.sampled_from([(), Ellipsis, None]))
    value = draw(st.one_of(
        st.booleans(), st.integers(-300, 300), st.floats(allow_nan=True, allow_infinity=True, width=32),
        st.sampled_from([-0.0, float("nan"), 2**70]),
        st.builds(lambda v, d: np.dtype(d).type(v), st.integers(0, 100), st.sampled_from(DTYPES)),
        st.builds(lambda v, d: np.array(v, d), st.integers(0, 100), st.sampled_from(DTYPES))))
    return dtype, shape, key, value


def _numpy_write(a, key, value):
    """NumPy's a[key] = value under lazytensor's rule: a weak Python float into an integer or bool
    array, or an int into a bool array, is a TypeError ('same_kind'); a strong value too where
    np.can_cast refuses it. The index is checked first (an IndexError before a TypeError)."""
    a[key]
    kind = a.dtype.kind
    if type(value) is float and kind in "biu" or type(value) is int and kind == "b":
        raise TypeError("same_kind")
    if isinstance(value, (np.generic, np.ndarray)) and not np.can_cast(value.dtype, a.dtype, "same_kind"):
        raise TypeError("same_kind")
    a[key] = value


def _outcome(f):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            f()
        except (IndexError, TypeError, OverflowError, ValueError) as e:
            return type(e)
    return None


def _same(got, want):
    np.testing.assert_array_equal(got, want, strict=True)
    if got.dtype.kind == "f":       # -0.0 stays -0.0
        assert np.array_equal(np.signbit(got), np.signbit(want))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=writes())
def test_scalar_writes_match_numpy(tier, case):
    dtype, shape, key, value = case
    start = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape).astype(dtype)
    want = start.copy()
    want_error = _outcome(lambda: _numpy_write(want, key, value))
    t = lt.asarray(start.copy())
    got_error = _outcome(lambda: t.__setitem__(key, value))
    assert got_error == want_error
    _same(t.numpy(), want)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=writes())
def test_a_write_keeps_the_values_of_expressions_built_before(tier, case):
    dtype, shape, key, value = case
    start = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape).astype(dtype)
    t = lt.asarray(start.copy())
    before = t + t                  # reads t's memory: the write settles it first
    view_before = t[...] * 1
    want = start.copy()
    want_error = _outcome(lambda: _numpy_write(want, key, value))
    assert _outcome(lambda: t.__setitem__(key, value)) == want_error
    _same(t.numpy(), want)
    _same(before.numpy(), start + start)
    _same(view_before.numpy(), start * 1)


def test_views_see_writes_both_ways(tier):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = lt.asarray(a.copy())
    row = t[1]
    item = t[2, -1]
    block = t[0:2, 1:3]
    t[1, 2] = 50.0
    a[1, 2] = 50.0
    row[0] = -1.0
    a[1, 0] = -1.0
    block[0, 0] = 7
    a[0, 1] = 7
    t[2, -1] = 0.5
    a[2, -1] = 0.5
    _same(t.numpy(), a)
    _same(row.numpy(), a[1])
    _same(block.numpy(), a[0:2, 1:3])
    assert float(item) == 0.5 and item.shape == () and item.dtype == np.float32


def test_a_sum_built_before_an_item_write_keeps_its_value(tier):
    t = lt.asarray(np.ones(8, np.float32))
    s = t.sum()
    t[3] = 10.0
    t[0:2] = 0.0
    t[...] = 2.0
    assert float(s) == 8.0
    assert float(t.sum()) == 16.0


def test_an_expression_whose_result_is_the_tensor_is_settled_first(tier):
    t = lt.asarray(np.arange(4, dtype=np.float64))
    e = t * 2
    t[...] = e                      # e read t, and its value is now t's memory
    t[0] = 100.0
    assert e.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert t.numpy().tolist() == [100.0, 2.0, 4.0, 6.0]
    t[1] = 9.0
    assert e.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]


def test_a_gradient_through_an_evaluated_node_after_an_item_write_is_refused(tier):
    x = lt.asarray(np.array([1.0, 2.0, 3.0]))
    y = x * x
    s = lt.sum(y)
    y.eval()
    x[0] = 5.0
    with pytest.raises(ValueError, match="written since"):
        lt.grad(s, [x])


@pytest.mark.parametrize("dtype", DTYPES)
def test_reads_of_items_match_numpy(tier, dtype):
    a = (np.arange(-6, 6).reshape(3, 4) * 3).astype(dtype)
    t = lt.asarray(a.copy())
    for i, j in [(0, 0), (2, 3), (-1, -2), (1, -4)]:
        for conv in (float, int, bool, complex):
            assert conv(t[i, j]) == conv(a[i, j])
        got = t[i, j].item()
        assert got == a[i, j].item() and type(got) is type(a[i, j].item())
        _same(t[i].numpy(), a[i])
    with pytest.raises(IndexError):
        t[3]
    with pytest.raises(IndexError):
        t[0, -5]
    with pytest.raises(IndexError):
        t[0, 0, 0]


def test_errors_as_the_general_path(tier):
    t = lt.asarray(np.zeros(4, np.int8))
    with pytest.raises(IndexError):
        t[4] = 1
    with pytest.raises(IndexError):
        t[-5] = 1
    with pytest.raises(TypeError, match="same_kind"):
        t[0] = 0.5
    with pytest.raises(TypeError, match="same_kind"):
        t[0] = float("nan")
    with pytest.raises(OverflowError):
        t[0] = 300
    with pytest.raises(TypeError, match="same_kind"):
        t[0] = np.float32(1.0)
    b = lt.asarray(np.zeros(2, bool))
    with pytest.raises(TypeError, match="same_kind"):
        b[0] = 1
    ro = np.zeros(3)
    ro.flags.writeable = False
    r = lt.asarray(ro)
    with pytest.raises(ValueError, match="read-only"):
        r[0] = 1.0
    assert t.numpy().tolist() == [0, 0, 0, 0]


def test_a_zero_d_tensor(tier):
    t = lt.asarray(np.array(1.5, np.float32))
    t[()] = 2.5
    assert float(t) == 2.5
    t[...] = np.float64(-0.0)
    assert np.signbit(t.numpy()) and t.dtype == np.float32
    t[None] = 4
    assert t.item() == 4.0


@pytest.mark.gpu
@pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")
def test_cuda_items_take_the_general_path():
    a = np.arange(6, dtype=np.float32)
    t = lt.asarray(a, device="cuda")
    e = t * 1
    t[2] = 9.0
    t[0:1] = -1
    a[2], a[0] = 9.0, -1
    assert t.numpy().tolist() == a.tolist()
    assert e.numpy().tolist() == list(range(6))
    assert float(t[2]) == 9.0
    with pytest.raises(IndexError):
        t[6] = 0.0


def test_a_gradient_reaches_the_tensor_through_an_item_view(tier):
    x = lt.asarray(np.array([[1.0, 2.0], [3.0, 4.0]]))
    (g,) = lt.grad(x[1, 0] * x[-1, -1] + lt.sum(x[0]) * 0, [x])
    np.testing.assert_array_equal(g.numpy(), [[0.0, 0.0], [4.0, 3.0]])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["+=", "-=", "*="])
def test_an_item_updated_in_place_as_numpy_and_the_general_path(tier, dtype, op):
    """`t[i] op= v`: NumPy's values (integers wrap), and the errors of the general path (taken where
    an expression reads t), which are NumPy's under 'same_kind'."""
    for value in (1, -3, 2.5, 300, -0.0, True):
        kind = np.dtype(dtype).kind
        if type(value) is float and kind != "f" or type(value) is int and kind == "b":
            continue    # (the general path itself raises without a reader and casts with one)
        a = (np.arange(6) * 50).astype(dtype)
        fast = lt.asarray(a.copy())
        general = lt.asarray(a.copy())
        reader = general * 1            # a live reader: the general path settles it first
        outcomes = []
        for t in (fast, general):
            def update(t=t):
                exec(f"t[-2] {op} value", {"t": t, "value": value})
            outcomes.append(_outcome(update))
        assert outcomes[0] == outcomes[1], (value, outcomes)
        _same(fast.numpy(), general.numpy())
        _same(reader.numpy(), a * 1)
        if outcomes[0] is None and dtype != np.bool_:
            want = a.copy()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                exec(f"want[-2:-1] {op} value", {"want": want, "value": value})
            _same(fast.numpy(), want)
