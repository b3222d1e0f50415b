"""The user-facing API: constructors, attributes, evaluation on assignment, NumPy
interoperability, reflected operators, NEP 50 promotion and broadcasting."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import lazytensor as lt


def _rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# -- constructors and attributes -------------------------------------------------------------------

def test_asarray_shares_numpy_memory_and_has_attributes():
    a = _rand((4, 5))
    t = lt.asarray(a)
    assert isinstance(t, lt.Tensor)
    assert t.shape == (4, 5) and t.dtype == np.float32 and t.ndim == 2 and t.size == 20
    assert t.device == "cpu"
    assert np.shares_memory(t.data, a)
    assert lt.asarray(t) is t
    np.testing.assert_array_equal(np.asarray(t), a)
    np.testing.assert_array_equal(t.numpy(), a)


@pytest.mark.parametrize("obj,dtype", [([1, 2, 3], np.int64), ([[1.5, 2.0]], np.float64), (3, np.int64),
                                       (True, np.bool_), (np.float16(2), np.float16)])
def test_asarray_from_lists_and_scalars(obj, dtype):
    t = lt.asarray(obj)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), np.asarray(obj))


def test_asarray_with_dtype_converts():
    t = lt.asarray([1, 2, 3], dtype=np.float16)
    assert t.dtype == np.float16
    np.testing.assert_array_equal(t.numpy(), np.array([1, 2, 3], np.float16))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.uint64, np.float16, np.float32,
                                   np.float64])
def test_zeros_ones_full_empty(dtype):
    z, o = lt.zeros((2, 3), dtype), lt.ones((2, 3), dtype)
    f = lt.full((2, 3), 1, dtype)
    e = lt.empty((2, 3), dtype)
    for t in (z, o, f, e):
        assert t.shape == (2, 3) and t.dtype == dtype and t.device == "cpu"
    np.testing.assert_array_equal(z.numpy(), np.zeros((2, 3), dtype))
    np.testing.assert_array_equal(o.numpy(), np.ones((2, 3), dtype))
    np.testing.assert_array_equal(f.numpy(), np.full((2, 3), 1, dtype))


def test_constructor_defaults_and_int_shape():
    assert lt.zeros(3).shape == (3,) and lt.zeros(3).dtype == np.float64     # NumPy's default dtype
    assert lt.ones((2,)).dtype == lt.empty(2).dtype == np.float64
    assert lt.full((2,), 2.5).dtype == np.float64       # the fill value's dtype, as np.full
    assert lt.full((2,), 7).dtype == np.int64
    np.testing.assert_array_equal(lt.full((), -0.5, np.float16).numpy(), np.full((), -0.5, np.float16))
    assert lt.zeros((0, 4)).size == 0


def test_like_constructors():
    a = lt.asarray(_rand((3, 2), np.float64))
    for f, want in ((lt.zeros_like, 0), (lt.ones_like, 1)):
        t = f(a)
        assert t.shape == a.shape and t.dtype == a.dtype and t.device == a.device
        np.testing.assert_array_equal(t.numpy(), np.full((3, 2), want, np.float64))
    e = lt.empty_like(a, dtype=np.int8)
    assert e.shape == (3, 2) and e.dtype == np.int8
    f = lt.full_like(a, 3.5, dtype=np.float16)
    np.testing.assert_array_equal(f.numpy(), np.full((3, 2), 3.5, np.float16))
    # *_like of an expression: its shape and dtype, nothing evaluated
    g = lt.zeros_like(a + 1)
    assert g.shape == (3, 2) and g.dtype == np.float64


@pytest.mark.parametrize("args,kw", [((5,), {}), ((2, 9, 3), {}), ((0, 1, 0.25), {}), ((5,), {"dtype": np.int8}),
                                     ((-3, 3), {"dtype": np.float32})])
def test_arange(args, kw):
    t = lt.arange(*args, **kw)
    want = np.arange(*args, **kw)
    assert t.dtype == want.dtype
    np.testing.assert_array_equal(t.numpy(), want)


# -- laziness, repr, evaluation ----------------------------------------------------------------------

def test_operators_build_expressions_and_repr_shows_the_tree():
    a = lt.asarray(_rand((4, 3)))
    b = lt.asarray(_rand((4, 3), seed=1))
    with lt.profile() as p:
        e = lt.relu((a + b) * 2 + 5 * a)
        text = repr(e)
    assert isinstance(e, lt.Expr) and not isinstance(e, lt.Tensor)
    assert p.kernels == []                     # nothing ran: repr prints the tree
    assert "relu" in text and "+" in text and "*" in text
    assert "shape=(4, 3)" in text and "float32" in text
    assert e.shape == (4, 3) and e.dtype == np.float32 and e.ndim == 2 and e.size == 12 and e.device == "cpu"


def test_assignment_forms_agree_with_numpy():
    an, bn = _rand((5, 7)), _rand((5, 7), seed=1)
    a, b = lt.asarray(an), lt.asarray(bn)
    e = lt.relu((a + b) * a + 5 * b)
    want = np.maximum((an + bn) * an + 5 * bn, 0)

    y = lt.empty_like(a)
    y[...] = e
    np.testing.assert_array_equal(y.numpy(), want)

    z = lt.zeros((5, 7))
    assert z.assign(e) is z
    np.testing.assert_array_equal(z.numpy(), want)

    for got in (lt.evaluate(e), e.eval()):
        assert isinstance(got, lt.Tensor)
        np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(np.asarray(e), want)
    np.testing.assert_array_equal(e.numpy(), want)
    copied = lt.evaluate(a)         # a new Tensor, as np.array(a): new memory, the same values
    assert copied is not a and not np.shares_memory(copied.data, a.data)
    np.testing.assert_array_equal(copied.numpy(), a.numpy())


def test_inplace_operators_keep_the_buffer():
    an = _rand((6, 5))
    y = lt.asarray(an.copy())
    buf = y.data
    a = lt.asarray(an)
    y += a * 2
    assert y.data is buf
    np.testing.assert_array_equal(y.numpy(), an + an * 2)
    y *= 0.5
    y -= a
    y /= 2
    assert y.data is buf
    with np.errstate(all="ignore"):
        want = ((an + an * 2) * np.float32(0.5) - an) / np.float32(2)
    np.testing.assert_array_equal(y.numpy(), want)

    i = lt.asarray(np.arange(10, dtype=np.int16))
    ibuf = i.data
    i //= 3
    i %= 2
    i |= 4
    i ^= 1
    i &= 7
    i **= 2
    assert i.data is ibuf
    w = np.arange(10, dtype=np.int16)
    w //= 3; w %= 2; w |= 4; w ^= 1; w &= 7; w **= 2  # noqa: E702
    np.testing.assert_array_equal(i.numpy(), w)


def test_assignment_into_a_slice_and_broadcasting_rhs():
    y = lt.zeros((4, 6), np.float64)
    row = lt.asarray(np.arange(6, dtype=np.float64))
    y[1:3] = row * 2                                  # (6,) broadcast into (2, 6)
    y[:, ::2] = 7.0                                   # a scalar
    want = np.zeros((4, 6))
    want[1:3] = np.arange(6) * 2
    want[:, ::2] = 7
    np.testing.assert_array_equal(y.numpy(), want)


def test_inplace_with_aliasing_reads_before_writing():
    """y[1:] = y[:-1] + 1 reads the old values, as NumPy does."""
    base = np.arange(8, dtype=np.float32)
    y = lt.asarray(base.copy())
    y[1:] = y[:-1] + 1
    want = base.copy()
    want[1:] = base[:-1] + 1
    np.testing.assert_array_equal(y.numpy(), want)


# -- NumPy's ufunc protocol ------------------------------------------------------------------------

def test_ufunc_protocol_builds_lazy_nodes():
    an, bn = _rand((3, 4)), _rand((3, 4), seed=2)
    a, b = lt.asarray(an), lt.asarray(bn)
    with lt.profile() as p:
        e1, e2, e3, e4 = np.exp(a), np.add(a, b), np.maximum(a, 0.5), np.multiply(2, a)
    assert p.kernels == []
    for e in (e1, e2, e3, e4):
        assert isinstance(e, lt.Expr)
    np.testing.assert_allclose(lt.evaluate(e1).numpy(), np.exp(an), rtol=4e-7)
    np.testing.assert_array_equal(lt.evaluate(e2).numpy(), an + bn)
    np.testing.assert_array_equal(lt.evaluate(e3).numpy(), np.maximum(an, 0.5))
    np.testing.assert_array_equal(lt.evaluate(e4).numpy(), 2 * an)


def test_ufunc_out_writes_the_destination():
    an, bn = _rand((3, 4)), _rand((3, 4), seed=2)
    y = lt.empty((3, 4))
    buf = y.data
    r = np.add(lt.asarray(an), lt.asarray(bn), out=y)
    assert r is y and y.data is buf
    np.testing.assert_array_equal(y.numpy(), an + bn)
    r = np.add(lt.asarray(an), lt.asarray(bn), out=(y,))
    np.testing.assert_array_equal(y.numpy(), an + bn)


def test_numpy_arrays_mix_with_tensors():
    an, bn = _rand((3, 4)), _rand((4,), seed=3)
    a = lt.asarray(an)
    e = a * bn                              # ndarray on the right
    e2 = bn + a                             # ndarray on the left: NumPy defers to the protocol
    assert isinstance(e, lt.Expr) and isinstance(e2, lt.Expr)
    np.testing.assert_array_equal(lt.evaluate(e).numpy(), an * bn)
    np.testing.assert_array_equal(lt.evaluate(e2).numpy(), bn + an)


# -- reflected operators, scalars, NEP 50 ------------------------------------------------------------

@pytest.mark.parametrize("scalar", [3, 2.5, np.float32(2.5), np.int16(3), np.float64(0.5), True])
def test_reflected_operators_with_scalars(scalar):
    an = np.array([1.5, -2.0, 4.0, 0.25], np.float32)
    a = lt.asarray(an)
    cases = {
        "add": (scalar + a, scalar + an), "sub": (scalar - a, scalar - an), "mul": (scalar * a, scalar * an),
        "truediv": (scalar / a, scalar / an), "floordiv": (scalar // a, scalar // an),
        "mod": (scalar % a, scalar % an), "pow": (scalar ** a, scalar ** an),
        "lt": (scalar < a, scalar < an), "eq": (scalar == a, scalar == an),
    }
    for name, (e, want) in cases.items():
        assert isinstance(e, lt.Expr), name
        want = np.asarray(want)
        got = lt.evaluate(e).numpy()
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=2e-7 if want.dtype == np.float32 else 1e-15, err_msg=name)


def test_reflected_bitwise_with_scalars():
    an = np.array([1, 6, -3, 127], np.int8)
    a = lt.asarray(an)
    for e, want in ((5 & a, 5 & an), (5 | a, 5 | an), (5 ^ a, 5 ^ an), (np.int8(3) & a, np.int8(3) & an),
                    (True | lt.asarray(an > 0), True | (an > 0))):
        got = lt.evaluate(e).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_nep50_python_int_out_of_range_raises_overflow():
    t = lt.asarray(np.array([1, 2], np.int8))
    with pytest.raises(OverflowError):
        t + 300
    with pytest.raises(OverflowError):
        lt.asarray(np.array([1], np.uint8)) + (-1)
    # Comparisons are exact instead (NumPy 2): int8 < 300 is True everywhere.
    np.testing.assert_array_equal(lt.evaluate(t < 300).numpy(), [True, True])
    np.testing.assert_array_equal(lt.evaluate(t == -1000).numpy(), [False, False])


@pytest.mark.parametrize("value", [300, -1000, 2**63, 2**64, -2**63 - 1, 2**100, -2**100])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int64", "uint64", "bool"])
def test_comparison_with_python_int_of_any_size_behaves_as_numpy(dtype, value):
    """Integers compare exactly with any Python int; bool meets it in an int64 loop and overflows.
    Each is built twice, on either side: the second build takes the cached type rule."""
    an = np.array([0, 1, 2], dtype)
    t = lt.asarray(an)
    for _ in range(2):
        for op in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge):
            for args, lt_args in (((an, value), (t, value)), ((value, an), (value, t))):
                try:
                    want = op(*args)
                except OverflowError:
                    with pytest.raises(OverflowError):
                        op(*lt_args)
                    continue
                np.testing.assert_array_equal(lt.evaluate(op(*lt_args)).numpy(), want,
                                              err_msg=f"{op.__name__}{args}")


def test_nep50_promotion_rules():
    f16 = lt.asarray(np.array([1.5, 2.0], np.float16))
    i32 = lt.asarray(np.array([7, -3], np.int32))
    i8 = lt.asarray(np.array([7, -3], np.int8))
    u8 = lt.asarray(np.array([7, 3], np.uint8))
    assert (f16 * 2.5).dtype == np.float16                  # weak Python float keeps float16
    assert (f16 * 2).dtype == np.float16
    assert (f16 * np.float64(2.5)).dtype == np.float64      # a NumPy scalar is strong
    assert (f16 * np.float32(2.5)).dtype == np.float32
    assert (i8 + 1).dtype == np.int8
    assert (i8 + 1.0).dtype == np.float64                   # int + float: default float
    assert (i32 / i32).dtype == np.float64
    assert (i8 / i8).dtype == np.float64
    assert (i8 + u8).dtype == np.int16
    assert (i8 + np.int64(1)).dtype == np.int64
    assert (i8 > 0).dtype == np.bool_
    assert (f16 + i8).dtype == np.float16
    assert (f16 + i32).dtype == np.float64
    np.testing.assert_array_equal(lt.evaluate(f16 * 2.5).numpy(), np.array([1.5, 2.0], np.float16) * 2.5)
    np.testing.assert_array_equal(lt.evaluate(i32 / i32).numpy(), np.array([1.0, 1.0]))
    np.testing.assert_array_equal(lt.evaluate(i8 * 100).numpy(), np.array([7, -3], np.int8) * 100)   # wraps


def test_integer_division_and_modulo_by_zero_give_numpy_results():
    for dtype in (np.int8, np.int32, np.int64, np.uint8, np.uint64):
        an = np.array([7, 0, 5, np.iinfo(dtype).max, np.iinfo(dtype).min], dtype)
        bn = np.array([0, 0, 2, 0, 0], dtype)
        a, b = lt.asarray(an), lt.asarray(bn)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(lt.evaluate(a // b).numpy(), an // bn)
            np.testing.assert_array_equal(lt.evaluate(a % b).numpy(), an % bn)
    m = lt.asarray(np.array([-128], np.int8))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(lt.evaluate(m // -1).numpy(), np.array([-128], np.int8) // np.int8(-1))


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "float32"])
@pytest.mark.parametrize("exponent", [2, 2.0, 3, 0.5, True, np.int8(2), np.float32(2.0)])
def test_power_dtypes_as_numpy_operator_and_ufunc(dtype, exponent):
    """x ** 2 is square(x) only where the dtype stays: NumPy's `**` squares a bool into int8 while
    np.power(bool, 2) is int64, and an integer ** 2.0 is float64. A float x ** 0.5 is sqrt(x) for
    the operator, where float16's np.power differs at -inf and -0.0."""
    an = np.array([0, 1, 3] + ([-np.inf, -0.0, np.inf, np.nan, -2.0] if dtype.startswith("float") else []), dtype)
    t = lt.asarray(an)
    with np.errstate(all="ignore"):
        for want, got in ((an ** exponent, t ** exponent), (np.power(an, exponent), np.power(t, exponent))):
            got = lt.evaluate(got).numpy()
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
            assert np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))      # -0.0 ** 0.5


def test_integer_power_with_negative_exponent_is_documented_not_numpy():
    """Deliberate difference: NumPy raises ValueError for negative integer exponents; an
    elementwise kernel cannot raise, so lazytensor gives 1 for base 1, +-1 for base -1, else 0."""
    base = np.array([1, -1, -1, 2, 0, 5], np.int32)
    exp = np.array([-1, -1, -2, -1, 3, 2], np.int32)
    with pytest.raises(ValueError):
        np.power(base, exp)
    got = lt.evaluate(lt.asarray(base) ** lt.asarray(exp)).numpy()
    np.testing.assert_array_equal(got, [1, -1, 1, 0, 0, 25])


# -- broadcasting --------------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb", [((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 1, 5), (3, 1)), ((), (2, 3)),
                                   ((0, 3), (3,)), ((1,), (7, 13)), ((5, 1, 1), (1, 4, 1))])
def test_broadcasting_like_numpy(sa, sb):
    an, bn = _rand(sa, np.float64), _rand(sb, np.float64, seed=5)
    e = lt.asarray(an) * lt.asarray(bn) - lt.asarray(bn)
    want = an * bn - bn
    assert e.shape == want.shape
    np.testing.assert_array_equal(lt.evaluate(e).numpy(), want)


def test_zero_d_and_empty_tensors():
    s = lt.asarray(np.float32(3.0))
    assert s.shape == () and s.ndim == 0 and s.size == 1
    assert float(lt.evaluate(s * 2)) == 6.0
    e = lt.evaluate(lt.asarray(np.zeros((0, 5), np.int16)) + 1)
    assert e.shape == (0, 5) and e.dtype == np.int16


def test_where_clip_astype_functions():
    an = np.array([-2.0, -0.5, 0.0, 0.5, 3.0, np.nan], np.float32)
    a = lt.asarray(an)
    np.testing.assert_array_equal(lt.evaluate(lt.where(a > 0, a, 0.0)).numpy(), np.where(an > 0, an, np.float32(0)))
    np.testing.assert_array_equal(lt.evaluate(lt.clip(a, -1, 1)).numpy(), np.clip(an, -1, 1))
    np.testing.assert_array_equal(lt.evaluate(lt.clip(a, None, 1)).numpy(), np.clip(an, None, 1))
    np.testing.assert_array_equal(lt.evaluate(a.astype(np.float16)).numpy(), an.astype(np.float16))
    np.testing.assert_array_equal(lt.evaluate(lt.astype(a, np.float64)).numpy(), an.astype(np.float64))
    np.testing.assert_array_equal(lt.evaluate(lt.isnan(a)).numpy(), np.isnan(an))
    np.testing.assert_array_equal(lt.evaluate(lt.isfinite(a)).numpy(), np.isfinite(an))


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int64", "uint64", "float16", "float32"])
@pytest.mark.parametrize("bounds", [(None, 2**64 - 1), (None, 2**63), (-2**63 - 1, None), (-5, None),
                                    (None, 2**70), (None, -1), (3, 2**64 - 1)])
def test_clip_with_python_int_bounds_of_any_size_behaves_as_numpy(dtype, bounds):
    x = np.array([0, 1, 5], dtype)
    try:
        with np.errstate(over="ignore"):        # a huge bound is inf in float16, as intended
            want = np.clip(x, *bounds)
    except OverflowError:
        with pytest.raises(OverflowError):
            lt.clip(lt.asarray(x), *bounds).numpy()
        return
    got = lt.clip(lt.asarray(x), *bounds).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_huge_python_ints_reach_float_kernels_as_floats():
    x = lt.asarray(np.ones(3, np.float32))
    np.testing.assert_array_equal((x + 2**70).numpy(), np.ones(3, np.float32) + 2**70)
    with pytest.raises(OverflowError):
        x + 10**400


def test_numpy_scalars_and_0d_arrays_join_tensors_on_any_device():
    # NumPy hands a scalar's operator to the ufunc as a 0-d array: it must stay a (strong) scalar,
    # not become a CPU tensor, or `np.False_ == t` would mix devices for a tensor on "cuda".
    t = lt.Tensor(np.array(False), "cuda")      # builds without a GPU: nothing is evaluated
    e = np.False_ == t
    assert e.device == "cuda" and e.dtype == np.bool_
    f = lt.Tensor(np.ones(3, np.float32), "cuda")
    assert (np.array(2.0) * f).dtype == np.float64 and (np.array(2.0) * f).device == "cuda"
    c = lt.asarray(np.array([1.0, 2.0], np.float32), device="cpu")
    np.testing.assert_array_equal((np.array(2.0, np.float32) * c).numpy(), [2.0, 4.0])
