"""NumPy's names, array methods, constructors and functions on tensors, against NumPy:
names and constants, tolist/copy/flatten/round/clip/fill/itemsize/nbytes/strides/__format__,
float64 constructor defaults, the errors for big-endian and read-only arrays, linspace/eye/
identity, concatenate/stack/hstack/vstack, flip, sort/argsort (also through np.<function>)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt

from lazytensor.testing.strategies import elements

SETTINGS = settings(max_examples=10, deadline=None)


# -- names, methods, constructors, errors --------------------------------------------------------

def test_dtype_names_and_constants_are_numpys():
    for name in ("bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64"):
        assert np.dtype(getattr(lt, name)) == np.dtype(getattr(np, name))
    assert (lt.newaxis, lt.pi, lt.e, lt.inf) == (np.newaxis, np.pi, np.e, np.inf) and np.isnan(lt.nan)
    t = lt.asarray(np.arange(3.0))
    assert t[:, lt.newaxis].shape == (3, 1) and t.astype(lt.float32).dtype == np.float32


def test_constructors_default_to_float64():
    for t in (lt.zeros(3), lt.ones((2, 2)), lt.empty(4), lt.eye(2), lt.identity(3), lt.linspace(0, 1, 3)):
        assert t.dtype == np.float64


def test_array_methods_match_numpy():
    x = np.array([[1.5, -2.25, 3.0], [0.5, np.nan, -0.0]])
    t = lt.asarray(x)
    assert repr(t.tolist()) == repr(x.tolist())          # NaN and -0.0 included
    c = t.copy()
    assert isinstance(c, lt.Tensor) and c.data is not t.data
    np.testing.assert_array_equal(c.numpy(), x)
    c.fill(7)
    np.testing.assert_array_equal(c.numpy(), np.full_like(x, 7))
    np.testing.assert_array_equal(t.numpy(), x)                  # the copy owns its memory
    f = t.flatten()
    assert isinstance(f, lt.Tensor) and f.shape == (6,)
    np.testing.assert_array_equal(f.numpy(), x.flatten())
    np.testing.assert_array_equal((t * 2).copy().numpy(), x * 2)
    np.testing.assert_array_equal(lt.asarray(np.arange(4, dtype=np.int16)).copy().numpy(), np.arange(4, dtype=np.int16))
    np.testing.assert_array_equal(t.round(1).numpy(), x.round(1))
    np.testing.assert_array_equal(round(t).numpy(), np.round(x))
    np.testing.assert_array_equal(t.clip(0, 1).numpy(), x.clip(0, 1))
    assert (t.itemsize, t.nbytes, t.strides) == (x.itemsize, x.nbytes, x.strides)
    assert (t * 2).strides == (x * 2).strides and t.T.strides == x.T.strides
    assert f"{lt.asarray(np.float32(0.123456)):.3f}" == "0.123" and f"{t[0].sum() * 0 + 2:>5.1f}" == "  2.0"
    with pytest.raises(TypeError, match="only a tensor of one element formats as a number"):
        f"{t:.3f}"
    assert f"{t}" == str(t)
    e = t * 2
    e.fill(1)                   # an expression's first write gives it memory of its own
    np.testing.assert_array_equal(e.numpy(), np.ones_like(x))


def test_big_endian_arrays_say_how_to_convert():
    with pytest.raises(TypeError, match=r"byte order.*x\.astype\(x\.dtype\.newbyteorder\('='\)\)"):
        lt.asarray(np.ones(3, ">f4"))


def test_assignment_into_read_only_arrays_says_so():
    a = np.ones(3)
    a.flags.writeable = False
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        lt.asarray(a)[...] = 2
    b = lt.broadcast_to(lt.asarray(np.ones(3)), (2, 3))
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        b += 1


def test_invalid_index_error_points_to_where():
    with pytest.raises(IndexError, match=r"integer or boolean arrays.*got float.*lt\.where\(mask, x, fill\)"):
        lt.asarray(np.arange(3))[1.5]


# -- functions ---------------------------------------------------------------------------------------

def test_linspace_eye_identity():
    np.testing.assert_array_equal(lt.linspace(-1, 2, 7).numpy(), np.linspace(-1, 2, 7))
    np.testing.assert_array_equal(lt.linspace(0, 1, 4, endpoint=False, dtype=np.float32).numpy(),
                                  np.linspace(0, 1, 4, endpoint=False, dtype=np.float32))
    np.testing.assert_array_equal(lt.eye(3, 4, k=-1, dtype=np.int8).numpy(), np.eye(3, 4, k=-1, dtype=np.int8))
    np.testing.assert_array_equal(lt.identity(2).numpy(), np.identity(2))


_DTYPES = st.sampled_from(["bool", "int8", "uint16", "float16", "float64"])


@st.composite
def _parts(draw):
    shape = draw(st.sampled_from([(3,), (2, 3), (1, 4), (2, 0, 3)]))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    arrays = []
    for _ in range(draw(st.integers(1, 3))):
        s = list(shape)
        s[axis] = draw(st.integers(0, 3))
        dtype = draw(_DTYPES)
        arrays.append(draw(hnp.arrays(dtype, tuple(s), elements=elements(dtype))))
    return arrays, axis


@SETTINGS
@given(_parts())
def test_concatenate_matches_numpy(parts):
    arrays, axis = parts
    want = np.concatenate(arrays, axis=axis)
    ts = [lt.asarray(a) for a in arrays]
    for got in (lt.concatenate(ts, axis=axis), np.concatenate(ts, axis=axis)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(lt.concatenate(ts, axis=None).numpy(), np.concatenate(arrays, axis=None))


@SETTINGS
@given(hnp.arrays("float32", st.sampled_from([(), (3,), (2, 3)]), elements=elements("float32")),
       st.integers(0, 2))
def test_stack_hstack_vstack_flip_match_numpy(x, n):
    with np.errstate(over="ignore"):
        arrays = [x, x * 2, -x][: n + 1]
    ts = [lt.asarray(a) for a in arrays]
    for axis in range(-x.ndim - 1, x.ndim + 1):
        np.testing.assert_array_equal(lt.stack(ts, axis=axis).numpy(), np.stack(arrays, axis=axis))
    np.testing.assert_array_equal(lt.hstack(ts).numpy(), np.hstack(arrays))
    np.testing.assert_array_equal(np.vstack(ts).numpy(), np.vstack(arrays))
    np.testing.assert_array_equal(lt.flip(ts[0]).numpy(), np.flip(x))
    if x.ndim:
        np.testing.assert_array_equal(np.flip(ts[0] + 1, -1).numpy(), np.flip(x + 1, -1))


def test_joining_errors_are_numpys():
    a, b = lt.asarray(np.ones((2, 3))), lt.asarray(np.ones((2, 4)))
    with pytest.raises(ValueError, match="along dimension 1, the array at index 0 has size 3 and the array at index 1 has size 4"):
        lt.concatenate([a, b], axis=0)
    with pytest.raises(ValueError, match="must have the same shape"):
        lt.stack([a, b])
    with pytest.raises(TypeError, match="sequence of tensors"):
        lt.concatenate(a)


@SETTINGS
@given(st.sampled_from(["int8", "uint64", "float16", "float64"]).flatmap(
    lambda d: hnp.arrays(d, st.sampled_from([(7,), (3, 4)]), elements=elements(d))))
def test_sort_and_argsort_match_numpy(x):
    t = lt.asarray(x)
    for axis in (-1, 0, None):
        np.testing.assert_array_equal(lt.sort(t, axis=axis).numpy(), np.sort(x, axis=axis))
        np.testing.assert_array_equal(np.argsort(t, axis=axis, kind="stable").numpy(),
                                      np.argsort(x, axis=axis, kind="stable"))
    desc = lt.argsort(t, axis=0, descending=True).numpy()
    want = np.flip(np.argsort(np.flip(x, 0), axis=0, kind="stable"), 0)
    np.testing.assert_array_equal(desc, x.shape[0] - 1 - want)


@SETTINGS
@given(st.sampled_from(["bool", "int8", "uint32", "float16", "float64"]).flatmap(
    lambda d: hnp.arrays(d, st.sampled_from([(5,), (2, 3), (3, 1, 2)]), elements=elements(d))),
    st.data())
def test_gathers_scans_and_rearrangements_match_numpy(x, data):
    t = lt.asarray(x)
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    for got, want in zip(lt.nonzero(t), np.nonzero(x)):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got.numpy(), want)
    for got, want in zip(np.where(t), np.where(x)):
        np.testing.assert_array_equal(got.numpy(), want)
    idx = data.draw(hnp.arrays(np.int64, (4,), elements=st.integers(-x.shape[axis], x.shape[axis] - 1)))
    np.testing.assert_array_equal(lt.take(t, idx, axis=axis).numpy(), np.take(x, idx, axis=axis))
    np.testing.assert_array_equal(np.take(t, lt.asarray(idx % x.size)).numpy(), np.take(x, idx % x.size))
    order = np.argsort(x, axis=axis, kind="stable")
    np.testing.assert_array_equal(lt.take_along_axis(t, lt.asarray(order), axis).numpy(),
                                  np.take_along_axis(x, order, axis))
    with np.errstate(all="ignore"):
        for name in ("cumsum", "cumprod"):
            for ax in (axis, None):
                want = getattr(np, name)(x, axis=ax)
                got = getattr(lt, name)(t, axis=ax)
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got.numpy(), want)
            np.testing.assert_array_equal(getattr(t, name)(axis).numpy(), getattr(np, name)(x, axis))
        np.testing.assert_array_equal(lt.cumulative_sum(t, axis=axis, include_initial=True).numpy(),
                                      np.cumulative_sum(x, axis=axis, include_initial=True))
    shift = data.draw(st.integers(-7, 7))
    np.testing.assert_array_equal(lt.roll(t, shift, axis=axis).numpy(), np.roll(x, shift, axis=axis))
    np.testing.assert_array_equal(np.roll(t, shift).numpy(), np.roll(x, shift))
    np.testing.assert_array_equal(lt.repeat(t, 2, axis=axis).numpy(), np.repeat(x, 2, axis=axis))
    np.testing.assert_array_equal(np.tile(t, (2, 1)).numpy(), np.tile(x, (2, 1)))


def test_gather_errors_are_numpys():
    t = lt.asarray(np.arange(6).reshape(2, 3))
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis with size 3"):
        lt.take(t, [3], axis=1)
    with pytest.raises(IndexError, match="indices must be integers"):
        lt.take(t, np.array([0.5]))
    with pytest.raises(ValueError, match="either both or neither"):
        lt.where(t > 1, t)


@pytest.mark.gpu
@pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")
def test_functions_on_cuda_stay_on_the_device_and_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    x[0, 0] = np.nan
    t = lt.asarray(x, device="cuda")
    cases = [(lt.concatenate([t, t * 2], axis=1), np.concatenate([x, x * 2], axis=1)),
             (lt.stack([t, -t]), np.stack([x, -x])), (lt.flip(t, 0), np.flip(x, 0)),
             (lt.sort(t, axis=0), np.sort(x, axis=0)), (lt.argsort(t, kind="stable"), np.argsort(x, kind="stable")),
             (lt.take(t, [3, 0], axis=1), np.take(x, [3, 0], axis=1)), (lt.cumsum(t > 0, axis=1), np.cumsum(x > 0, axis=1)),
             (lt.roll(t, 2), np.roll(x, 2)), (lt.repeat(t, 2, axis=1), np.repeat(x, 2, axis=1)),
             (lt.tile(t, (1, 2)), np.tile(x, (1, 2))), (lt.nonzero(t > 0)[1], np.nonzero(x > 0)[1]),
             (lt.linspace(0, 1, 7, device="cuda"), np.linspace(0, 1, 7)), (lt.round(t, 2), np.round(x, 2)),
             (lt.eye(3, device="cuda"), np.eye(3))]
    for got, want in cases:
        assert got.device == "cuda" and got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want)
    y = lt.zeros((4, 5), device="cuda")
    np.multiply(t, 2, out=y, where=t > 0)
    np.testing.assert_array_equal(y.numpy(), np.where(x > 0, x * 2, 0).astype(np.float64))


@SETTINGS
@given(st.integers(0, 2**32), st.sampled_from([None, 3, (2, 0), (2, 3)]))
def test_random_generator_on_the_cpu_is_numpys_stream(seed, size):
    g, r = lt.random.default_rng(seed, device="cpu"), np.random.default_rng(seed)
    draws = [(g.random(size), r.random(size)), (g.standard_normal(size, dtype=np.float32), r.standard_normal(size, dtype=np.float32)),
             (g.uniform(-2, 5, size), r.uniform(-2, 5, size)), (g.normal(1, 3, size), r.normal(1, 3, size)),
             (g.integers(-5, 9, size, dtype=np.int16, endpoint=True), r.integers(-5, 9, size, dtype=np.int16, endpoint=True))]
    for got, want in draws:
        assert isinstance(got, lt.Tensor) and got.device == "cpu"
        want = np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.gpu
@pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")
def test_random_generator_on_cuda_draws_on_the_device():
    g = lt.random.default_rng(0, device="cuda")
    for t, lo, hi in ((g.random((1000,)), 0, 1), (g.uniform(-2, 5, (1000,)), -2, 5),
                      (g.integers(3, 7, (1000,)), 3, 6)):
        assert t.device == "cuda"
        v = t.numpy()
        assert v.min() >= lo and v.max() <= hi
    n = g.normal(1, 2, (20000,)).numpy()
    assert abs(n.mean() - 1) < 0.1 and abs(n.std() - 2) < 0.1
    assert g.standard_normal((3,), dtype=np.float32).dtype == np.float32


# -- fancy and boolean indexing ------------------------------------------------------------------------

@SETTINGS
@given(st.sampled_from(["int16", "float32", "bool"]).flatmap(
    lambda d: hnp.arrays(d, st.sampled_from([(5,), (3, 4), (2, 3, 2)]), elements=elements(d))), st.data())
def test_fancy_and_boolean_indexing_match_numpy(x, data):
    mask = data.draw(hnp.arrays(bool, x.shape))
    idx = data.draw(hnp.arrays(np.int64, (3,), elements=st.integers(-x.shape[0], x.shape[0] - 1)))
    t = lt.asarray(x.copy())
    for key in (mask, lt.asarray(mask), idx, lt.asarray(idx), list(idx), (idx, Ellipsis)):
        want = x[key if not isinstance(key, lt.Tensor) else key.numpy()]
        got = t[key]
        lazy = not isinstance(key, tuple)       # a mask's or a row index's gather is lazy (ops.masked, ops.index_write)
        assert isinstance(got, lt.Expr if lazy else lt.Tensor) and got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want)
    if x.ndim > 1:
        cols = np.array([x.shape[1] - 1, 0])
        np.testing.assert_array_equal(t[:, cols].numpy(), x[:, cols])
        np.testing.assert_array_equal(t[idx, cols[:1]].numpy(), x[idx, cols[:1]])
    np.testing.assert_array_equal((t * 1)[mask].numpy(), (x * 1)[mask])      # an expression is evaluated first

    y, want = lt.asarray(x.copy()), x.copy()
    fill = want.dtype.type(1)
    y[mask] = fill                                  # one fused kernel: where(mask, 1, y)
    want[mask] = fill
    np.testing.assert_array_equal(y.numpy(), want)
    y[lt.asarray(mask)] = lt.asarray(np.zeros((), want.dtype))
    want[mask] = 0
    np.testing.assert_array_equal(y.numpy(), want)
    vals = data.draw(hnp.arrays(want.dtype, (3,) + want.shape[1:], elements=elements(want.dtype)))
    y[idx] = lt.asarray(vals)
    want[idx] = vals
    np.testing.assert_array_equal(y.numpy(), want)
    if want.dtype.kind != "b":
        y[mask] += fill
        want[mask] += fill
        np.testing.assert_array_equal(y.numpy(), want)


def test_masked_assignment_of_a_scalar_is_one_kernel():
    y = lt.asarray(np.arange(6.0))
    with lt.profile() as p:
        y[y > 2] = -1.0
    assert len(p.kernels) == 1
    np.testing.assert_array_equal(y.numpy(), [0, 1, 2, -1, -1, -1])


def test_indexing_errors_are_numpys():
    t = lt.asarray(np.arange(6.0).reshape(2, 3))
    with pytest.raises(IndexError, match="boolean index did not match"):
        t[np.array([True, False, True])]
    with pytest.raises(IndexError, match="integer \\(or boolean\\) type"):
        t[np.array([0.5])]
    with pytest.raises(TypeError, match="same_kind"):
        lt.asarray(np.zeros(3, np.int8))[np.array([0])] = lt.asarray(np.ones(1))
