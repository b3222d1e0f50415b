"""complex64 and complex128: NEP 50 promotion, casts, the parts (real, imag, conj, angle), every
elementwise op that takes complex operands, reductions and matmul, against NumPy on drawn values
(NaN, infinities and signed zeros among the parts), on the compiled numba kernels and on the interpreter
tier (tests/conftest.py runs this file in both).

Tolerances: addition, subtraction, the parts, casts and comparisons give NumPy's bits. Products,
quotients, abs and sign may differ in the last bit (NumPy's SIMD loops fuse a multiply-add where the
kernels round the product first; numba's float32 hypot is not NumPy's), and the transcendental functions are numba's ports of NumPy's
complex functions on the compiled tier, not glibc's (kernels/cpu/numba_complex.py gives C99's special values of exp and of the
hyperbolic and circular functions; the inverse functions are tested on finite values): each finite part is within RTOL[dtype] of the
modulus of NumPy's value (a part near zero of a large value keeps an absolute error of that size), and
each non-finite part is NumPy's (NaN where NumPy's is NaN, the same infinity)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from lazytensor.kernels.ops import COMPLEX_OPS, OPS

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
RTOL = {C64: 4e-6, C128: 1e-13}
TRANSCENDENTAL = ["exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "sinh", "cosh", "log1p", "expm1", "log2",
                  "log10", "exp2"]
# numba's special values of these (an infinite or NaN part) are not C99's: finite operands only
INVERSE = ["arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"]
EXACT_UNARY = ["negative", "conjugate", "isnan", "isinf", "isfinite", "real", "imag", "logical_not", "rint"]
EXACT_BINARY = ["add", "subtract", "equal", "not_equal", "logical_and", "logical_or", "logical_xor"]
ROUNDED = ["multiply", "true_divide", "square", "reciprocal", "absolute", "sign"]
PROFILE = settings(max_examples=15, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

PARTS = st.one_of(st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5]),
                  st.floats(-1e3, 1e3), st.floats(allow_nan=True, allow_infinity=True, width=32))
FINITE_PARTS = st.one_of(st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.0]), st.floats(-20, 20, width=32))
MODERATE_PARTS = st.one_of(st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0]),
                           st.floats(-1e15, 1e15).map(lambda v: float(np.float32(v))))
WIDE_FINITE_PARTS = st.one_of(FINITE_PARTS, st.floats(allow_nan=False, allow_infinity=False, width=32))


def complex_arrays(dtype, n=16, parts=PARTS):
    return st.lists(st.tuples(parts, parts), min_size=n, max_size=n).map(
        lambda pairs: np.array([complex(r, i) for r, i in pairs], dtype))


def _reference(op, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(OPS[op].reference(*args))


def _same_bits(got, want):
    """Equal values, NaN equal to NaN, and the same sign of every zero (part by part)."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    for g, w in ((got.real, want.real), (got.imag, want.imag)) if want.dtype.kind == "c" else ((got, want),):
        np.testing.assert_array_equal(g, w)
        if want.dtype.kind == "f":
            zero = w == 0
            np.testing.assert_array_equal(np.signbit(g[zero]), np.signbit(w[zero]))


def _close(got, want, dtype):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    # the modulus of NumPy's value over its finite parts (one part may overflow where the other does not)
    parts = [np.where(np.isfinite(p), p, 0).astype(np.float64) for p in (want.real, want.imag)]
    scale = np.hypot(*parts)
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        finite = np.isfinite(w)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_array_equal(g[np.isinf(w)], w[np.isinf(w)])
        err = np.abs(g[finite].astype(np.float64) - w[finite].astype(np.float64))
        bound = RTOL[dtype] * np.maximum(scale[finite], np.finfo(w.dtype).tiny)
        assert (err <= bound).all(), (g[finite][err > bound], w[finite][err > bound])


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@pytest.mark.parametrize("op", EXACT_UNARY)
@PROFILE
@given(data=st.data())
def test_exact_unary_ops_give_numpys_bits(op, dtype, data):
    a = data.draw(complex_arrays(dtype))
    got = np.asarray(getattr(lt, "real" if op == "real" else op, None)(lt.asarray(a))
                     if op in ("real", "imag") else lt.core.expr.apply(op, lt.asarray(a)))
    _same_bits(got, _reference(op, a))


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@pytest.mark.parametrize("op", EXACT_BINARY)
@PROFILE
@given(data=st.data())
def test_exact_binary_ops_give_numpys_bits(op, dtype, data):
    a, b = data.draw(complex_arrays(dtype)), data.draw(complex_arrays(dtype))
    got = np.asarray(lt.core.expr.apply(op, lt.asarray(a), lt.asarray(b)))
    _same_bits(got, _reference(op, a, b))


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@pytest.mark.parametrize("op", ROUNDED)
@PROFILE
@given(data=st.data())
def test_products_and_quotients_are_numpys_within_a_rounding(op, dtype, data):
    """Parts below 1e15: a product of larger ones may overflow to inf in one sum of products and to NaN
    (inf - inf) in the other, as NumPy's fused multiply-add rounds them or not."""
    args = [data.draw(complex_arrays(dtype, parts=MODERATE_PARTS)) for _ in range(OPS[op].arity)]
    got = np.asarray(lt.core.expr.apply(op, *map(lt.asarray, args)))
    _close(got, _reference(op, *args), dtype)


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@pytest.mark.parametrize("op", TRANSCENDENTAL)
@PROFILE
@given(data=st.data())
def test_transcendental_functions_are_numpys_within_tolerance(op, dtype, data):
    a = data.draw(complex_arrays(dtype))
    if op == "sqrt":
        # Known gap: the compiled sqrt of a value whose parts are all subnormal or zero (0 + 5e-324j)
        # divides by a zero that NumPy's scaled algorithm avoids.
        tiny = np.finfo(a.real.dtype).tiny
        a = np.where((np.abs(a.real) < tiny) & (np.abs(a.imag) < tiny), 0, a).astype(dtype)
    _close(np.asarray(getattr(np, op)(lt.asarray(a))), _reference(op, a), dtype)


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@pytest.mark.parametrize("op", INVERSE)
@PROFILE
@given(data=st.data())
def test_inverse_functions_of_finite_values_are_numpys_within_tolerance(op, dtype, data):
    a = data.draw(complex_arrays(dtype, parts=WIDE_FINITE_PARTS))
    _close(np.asarray(getattr(np, op)(lt.asarray(a))), _reference(op, a), dtype)


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@PROFILE
@given(data=st.data())
def test_powers_are_numpys(dtype, data):
    """Small integer exponents by repeated multiplication, as NumPy (exact powers where the products are)."""
    a = data.draw(complex_arrays(dtype, parts=FINITE_PARTS))
    # Parts so small that the repeated products underflow lose their precision in either order of
    # multiplication: a known difference from NumPy's order, left out here.
    a = np.where(np.abs(a) < 1e-20, 0, a).astype(dtype)
    n = data.draw(st.integers(-6, 6))
    # complex64 powers compute in complex128 (lazytensor's, on both tiers): NumPy's complex128 value, rounded
    _close(np.asarray(lt.asarray(a) ** complex(n)), _reference("power", a.astype(C128), complex(n)).astype(dtype), dtype)
    b = data.draw(complex_arrays(dtype, parts=FINITE_PARTS))
    # general exponents: NumPy's complex128 value, rounded (its float32 cpowf amplifies rounding by |b log a|)
    want = _reference("power", a.astype(C128), b.astype(C128)).astype(dtype)
    _close(np.asarray(lt.asarray(a) ** lt.asarray(b)), want, dtype)


@pytest.mark.parametrize("other", ["bool", "int8", "uint16", "int64", "float16", "float32", "float64",
                                   "complex64", "complex128", int, float, complex])
@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
def test_promotion_is_nep50(dtype, other):
    """NumPy 2's promotion (the Array API's table, and NEP 50's weak Python scalars)."""
    a = np.array([1 + 2j, -0.5j], dtype)
    b = other(3) if isinstance(other, type) else np.array([2, 1], other)
    lb = b if isinstance(other, type) else lt.asarray(b)
    for got, want in ((lt.asarray(a) + lb, a + b), (lb * lt.asarray(a), b * a)):
        assert got.dtype == want.dtype
        _same_bits(np.asarray(got), want)


def test_python_complex_scalars_are_weak():
    x = lt.asarray(np.arange(3, dtype=np.float32))
    assert (x + 1j).dtype == np.complex64 and (lt.asarray(np.arange(3)) * 2j).dtype == np.complex128
    _same_bits(np.asarray(x * (1.5 - 2j)), np.arange(3, dtype=np.float32) * (1.5 - 2j))


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@pytest.mark.parametrize("dst", ["bool", "int32", "uint8", "float16", "float32", "float64", "complex64",
                                 "complex128"])
@PROFILE
@given(data=st.data())
def test_casts_are_numpys(dtype, dst, data):
    """Complex to real keeps the real part (NumPy's cast, without a warning at evaluation); to bool, nonzero."""
    parts = FINITE_PARTS if np.dtype(dst).kind in "iu" else PARTS
    a = data.draw(complex_arrays(dtype, parts=parts))
    if np.dtype(dst).kind in "iu":
        a = np.where(np.abs(a.real) < 100, a, 0).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        node = lt.asarray(a).astype(dst)
        want = a.astype(dst)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = np.asarray(node)
    _same_bits(got, want)


@pytest.mark.parametrize("src", ["bool", "int16", "uint64", "float16", "float32", "float64"])
@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
def test_real_dtypes_cast_to_complex(src, dtype):
    a = np.array([0, 1, 3, 7], src)
    _same_bits(np.asarray(lt.asarray(a).astype(dtype)), a.astype(dtype))


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@PROFILE
@given(data=st.data())
def test_parts_and_angle(dtype, data):
    a = data.draw(complex_arrays(dtype))
    x = lt.asarray(a)
    _same_bits(np.asarray(x.real), a.real)
    _same_bits(np.asarray(x.imag), a.imag)
    _same_bits(np.asarray(np.conj(x)), np.conj(a))
    np.testing.assert_allclose(np.asarray(lt.angle(x)), np.angle(a), rtol=1e-6)     # (numba's atan2: an ulp)
    np.testing.assert_allclose(np.asarray(np.angle(x, deg=True)), np.angle(a, deg=True), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
def test_parts_of_real_arrays_are_numpys(dtype):
    a = np.array([3, -1, 0, 2], dtype)
    x = lt.asarray(a)
    for got, want in ((lt.real(x), np.real(a)), (lt.imag(x), np.imag(a)), (lt.conj(x), np.conj(a)),
                      (lt.angle(x), np.angle(a))):
        _same_bits(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@pytest.mark.parametrize("kind", ["sum", "prod", "mean"])
@pytest.mark.parametrize("axis", [None, 0, 1])
@PROFILE
@given(data=st.data())
def test_reductions_are_numpys(dtype, kind, axis, data):
    """Sums and means accumulate in complex128 (NumPy's complex64 sums add in complex64, pairwise): within
    RTOL of the sum of the moduli."""
    a = data.draw(complex_arrays(dtype, n=12, parts=FINITE_PARTS)).reshape(3, 4)
    if kind == "prod":
        a = (a / np.maximum(np.abs(a), 1)).astype(dtype)
    got = np.asarray(getattr(lt, kind)(lt.asarray(a), axis=axis))
    want = getattr(np, kind)(a.astype(C128), axis=axis).astype(getattr(np, kind)(a, axis=axis).dtype)
    assert got.dtype == want.dtype
    scale = np.sum(np.abs(a.astype(C128)), axis=axis) + 1
    assert (np.abs(got - want) <= 8 * RTOL[dtype] * scale).all(), (got, want)


def test_any_all_of_complex():
    a = np.array([[0j, 1j], [0j, -0.0 + 0j]])
    for kind in ("any", "all"):
        for axis in (None, 0, 1):
            _same_bits(np.asarray(getattr(lt, kind)(lt.asarray(a), axis=axis)), np.asarray(getattr(np, kind)(a, axis=axis)))


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
@PROFILE
@given(data=st.data())
def test_matmul_is_numpys(dtype, data):
    a = data.draw(complex_arrays(dtype, n=12, parts=FINITE_PARTS)).reshape(3, 4)
    b = data.draw(complex_arrays(dtype, n=8, parts=FINITE_PARTS)).reshape(4, 2)
    got = np.asarray(lt.asarray(a) @ lt.asarray(b) + 1j)
    want = a @ b + 1j
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=RTOL[dtype] * 10, atol=RTOL[dtype] * 1e3)


def test_fused_expression_with_parts():
    """real, imag and abs of complex values fuse with real work: one program."""
    a = np.array([1 + 2j, -3 - 4j, 0.5j], C64)
    r = np.array([1.0, 2.0, 3.0], np.float32)
    x, y = lt.asarray(a), lt.asarray(r)
    got = np.asarray(lt.sqrt(x * y).real + abs(x) - lt.imag(x) * y)
    want = np.sqrt(a * r).real + abs(a) - a.imag * r
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("op", ["maximum", "minimum", "less", "greater_equal", "floor", "remainder", "arctan2"])
def test_ops_without_a_complex_meaning_refuse_complex(op):
    x = lt.asarray(np.array([1 + 1j]))
    with pytest.raises(TypeError, match="complex"):
        lt.core.expr.apply(op, *([x] * OPS[op].arity))


@pytest.mark.parametrize("kind", ["max", "min", "argmax", "var"])
def test_reductions_without_a_complex_meaning_refuse_complex(kind):
    with pytest.raises(TypeError, match="complex"):
        getattr(lt, kind)(lt.asarray(np.array([1 + 1j])))


def test_every_complex_op_has_snippets_for_both_languages():
    for op in COMPLEX_OPS:
        OPS[op].snippet("py", "c", 64)
        OPS[op].snippet("c", "c", 128)


@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
def test_round_rounds_each_part_as_numpy_and_the_standard(dtype):
    import lazytensor.array_api as xp
    a = np.array([0.5 + 2.5j, -1.5 - 0.5j, complex(np.nan, np.inf), complex(-0.0, -0.2), complex(-np.inf, 3.5)], dtype)
    for got in (lt.round(lt.asarray(a)), xp.round(xp.asarray(a)), np.round(lt.asarray(a))):
        _same_bits(np.asarray(got), np.round(a))
    with pytest.raises(NotImplementedError, match="decimals=0"):
        lt.round(lt.asarray(a), decimals=1)
