"""NumPy's further ufuncs and NumPy's protocols on tensors: lt.round, the shift operators,
ufunc keyword arguments (dtype=, out=, casting=, where=), ufunc methods, and the clear TypeError
for a NumPy ufunc or function lazytensor lacks. The op-table rows themselves are covered, with
every dtype and special values, by tests/core/test_expr_properties.py (which iterates the table)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt

from lazytensor.testing import assert_matches
from lazytensor.testing.strategies import elements

NEW_UFUNCS = ["log2", "log10", "exp2", "isinf", "signbit", "arcsin", "arccos", "arctan", "arctan2", "sinh",
              "cosh", "arcsinh", "arccosh", "arctanh", "hypot", "reciprocal", "rint", "trunc", "cbrt", "fmod",
              "fabs", "copysign", "nextafter", "logaddexp", "logaddexp2", "logical_and", "logical_or",
              "logical_xor", "logical_not", "left_shift", "right_shift"]


@pytest.mark.parametrize("name", NEW_UFUNCS)
def test_each_ufunc_is_an_lt_function_and_dispatches_from_numpy(name):
    """Both spellings build the op-table node with NumPy's dtype (values: test_expr_properties)."""
    ufunc = getattr(np, name)
    x = np.array([0.5, -0.25, 3.0], np.float32) if "shift" not in name else np.array([1, -8, 3], np.int16)
    args = (x,) * ufunc.nin
    via_numpy = ufunc(*(lt.asarray(a) for a in args))
    via_lt = getattr(lt, name)(*(lt.asarray(a) for a in args))
    assert isinstance(via_numpy, lt.Expr) and via_numpy.op == via_lt.op == name
    with np.errstate(all="ignore"):
        assert via_numpy.dtype == via_lt.dtype == ufunc(*args).dtype


_COUNTS = [-1, 0, 1, 7, 8, 9, 15, 16, 31, 32, 33, 63, 64, 65, 100]


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(["int8", "uint8", "int64", "uint64"]).flatmap(
    lambda d: st.tuples(hnp.arrays(d, st.sampled_from([(5,), (2, 3)]), elements=elements(d)),
                        hnp.arrays(d, (len(_COUNTS),), elements=st.just(0)).map(
                            lambda z: np.array([c for c in _COUNTS if c >= 0 or z.dtype.kind == "i"], z.dtype)))))
def test_shift_operators_match_numpy_beyond_the_width(pair):
    """<< and >> by counts at and beyond the width, and negative counts: NumPy gives 0, or -1 for
    a negative value shifted right (C leaves these undefined)."""
    a, b = pair
    a, b = a.reshape(-1)[:, None], b[None, :]         # every value against every count
    ta, tb = lt.asarray(a), lt.asarray(b)
    np.testing.assert_array_equal((ta << tb).numpy(), a << b)
    np.testing.assert_array_equal((ta >> tb).numpy(), a >> b)
    np.testing.assert_array_equal((3 << tb).numpy(), 3 << b)       # reflected, weak Python int
    np.testing.assert_array_equal((ta >> 1).numpy(), a >> 1)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(["float16", "float32", "float64"]).flatmap(
    lambda d: hnp.arrays(d, st.sampled_from([(7,), (2, 3)]), elements=elements(d))),
    st.integers(-3, 3))
def test_round_matches_numpy(x, decimals):
    with np.errstate(all="ignore"):
        want = np.round(x, decimals)
    got = lt.round(lt.asarray(x), decimals)
    assert got.dtype == want.dtype
    assert_matches(lt.evaluate(got).numpy(), want, 0.0, f"round({x!r}, {decimals})")
    assert_matches(np.round(lt.asarray(x), decimals).numpy(), want, 0.0, "np.round on a tensor")


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(["int8", "uint16"]).flatmap(
    lambda d: hnp.arrays(d, (6,), elements=st.integers(-100 if d[0] == "i" else 0, 100))),
    st.integers(-3, 2))
def test_round_of_integers_matches_numpy(x, decimals):
    want = np.round(x, decimals)
    got = lt.evaluate(lt.round(lt.asarray(x), decimals)).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_round_of_bool_raises_as_numpy():
    with pytest.raises(TypeError, match="bool"):
        lt.round(lt.asarray(np.array([True])))
    with pytest.raises(TypeError, match="decimals must be an int"):
        lt.round(lt.asarray(np.ones(2)), 1.5)


def test_float16_nextafter_steps_one_half():
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    for toward in (np.float16(np.inf), np.float16(-np.inf), np.float16(0.0), np.float16(-0.0), np.float16(1.0)):
        with np.errstate(all="ignore"):
            want = np.nextafter(h, toward)
        got = lt.evaluate(lt.nextafter(lt.asarray(h), toward)).numpy()
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(np.uint16), want[~nan].view(np.uint16))


# -- ufunc keyword arguments --------------------------------------------------------------------------

def test_ufunc_dtype_keyword_picks_numpys_loop():
    x = np.arange(1, 7, dtype=np.int8).reshape(2, 3)
    t = lt.asarray(x)
    for call in (lambda m, a: m.exp(a, dtype=np.float32), lambda m, a: m.add(a, 1.5, dtype=np.float32),
                 lambda m, a: m.multiply(a, a, dtype=np.int64), lambda m, a: m.sqrt(a, dtype="float64")):
        want = call(np, x)
        got = call(np, t)
        assert isinstance(got, lt.Expr) and got.dtype == want.dtype
        assert_matches(got.numpy(), want, np.spacing(np.abs(want).astype(want.dtype)).astype(np.float64) * 4
                       if want.dtype.kind == "f" else 0.0, "dtype=")


def test_ufunc_out_casting_and_where():
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    t = lt.asarray(x)
    y = lt.zeros((2, 3), dtype=np.float32)
    assert np.add(t, t, out=y, casting="unsafe") is y
    np.testing.assert_array_equal(y.numpy(), x + x)
    z = lt.asarray(np.full((2, 3), 7, np.int8))
    np.multiply(t, 3, out=z, where=t > 2)
    want = np.full((2, 3), 7, np.int8)
    np.multiply(x, 3, out=want, where=x > 2)
    np.testing.assert_array_equal(z.numpy(), want)
    f = lt.zeros((2, 3), dtype=np.float32)
    with pytest.raises(TypeError, match="Cannot cast ufunc 'divide' output from dtype\\('float64'\\) to "
                                        "dtype\\('float32'\\) with casting rule 'safe'"):
        np.true_divide(t, 2, out=f, casting="safe")
    with pytest.raises(TypeError, match="input 0 from dtype\\('float64'\\) to dtype\\('float32'\\)"):
        np.add(lt.asarray(np.ones(3)), 1.0, dtype=np.float32, casting="safe")
    with pytest.raises(TypeError, match="where=mask\\) without out="):
        np.exp(t, where=t > 1)
    with pytest.raises(TypeError, match="does not take order="):
        np.exp(t, order="F")


def test_ufunc_reduce_is_the_lazy_reduction():
    x = np.arange(12, dtype=np.int16).reshape(3, 4)
    t = lt.asarray(x)
    for ufunc, axis in ((np.add, 0), (np.multiply, 1), (np.maximum, None), (np.minimum, 0)):
        got = ufunc.reduce(t, axis=axis)
        assert isinstance(got, lt.Expr)
        np.testing.assert_array_equal(got.numpy(), ufunc.reduce(x, axis=axis))
    np.testing.assert_array_equal(np.logical_or.reduce(t > 5).numpy(), np.logical_or.reduce(x > 5))


def test_ufunc_lazytensor_lacks_raises_a_clear_type_error():
    t = lt.asarray(np.arange(4))
    with pytest.raises(TypeError, match=r"no lazy counterpart of np\.gcd; .*np\.gcd\(np\.asarray\(t\)"):
        np.gcd(t, t)
    with pytest.raises(TypeError, match=r"np\.add\.accumulate has no lazy counterpart.*np\.asarray\(t\)"):
        np.add.accumulate(t)


@pytest.mark.parametrize("call,name", [(lambda t: np.linalg.lstsq(t[:, None], t), "np.linalg.lstsq"),
                                       (lambda t: np.gradient(t), "np.gradient"),
                                       (lambda t: np.convolve(t, t), "np.convolve")])
def test_numpy_function_without_counterpart_raises_naming_it(call, name):
    t = lt.asarray(np.arange(4.0))
    with pytest.raises(TypeError, match=f"{name.replace('.', '[.]')} has no lazy counterpart.*np.asarray"):
        call(t)
    call(np.asarray(t))             # on purpose through NumPy: works


def test_clip_without_bounds_returns_its_operand():
    t = lt.asarray(np.arange(3.0))
    assert lt.clip(t) is t


def test_logaddexp_of_two_dtypes_in_one_kernel():
    """One kernel calling logaddexp2 in a float64 loop and again in a float16 loop (numba once lowered
    the second call with the first call's types)."""
    t0 = lt.asarray(np.arange(15, dtype=np.uint32).reshape(3, 1, 5))
    t1 = lt.asarray(np.array([[True, False, True, False, True]]))
    for f in (np.logaddexp, np.logaddexp2):
        inner = f(t0, t1)
        e = f(np.float16(0.5), (inner > 3).astype(np.float16))
        want = f(np.float16(0.5), (f(t0.numpy(), t1.numpy()) > 3).astype(np.float16))
        np.testing.assert_allclose(lt.evaluate(e).numpy(), want, rtol=2e-3)
