"""bfloat16 (ml_dtypes') as a dtype: NumPy's promotion with ml_dtypes, casts, printing, and every
elementwise op against ml_dtypes' own loops (NumPy with ml_dtypes computes in float32 and rounds to
bfloat16) on the compiled numba kernels and on the interpreter tier: bit for bit for the exactly
rounded ops, within ULPS bfloat16 ulps for the transcendental ones, on drawn bit patterns (NaN, inf,
subnormals and -0.0 among them)."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt
from lazytensor.kernels.backend import backend_for
from lazytensor.kernels.cache import KernelCache
from lazytensor.kernels.ops import ALL_DTYPES, BFLOAT16, OPS

BF = BFLOAT16
# Transcendental ops: float32 libm (or lazytensor's vectorized float32 functions) against ml_dtypes'
# std:: calls differ by float32 ulps, which after rounding may land on the neighbouring bfloat16.
ULPS = 1
TRANSCENDENTAL = {"exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "sigmoid", "log2", "log10", "exp2",
                  "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "hypot",
                  "cbrt", "logaddexp", "logaddexp2", "power"}


def _takes_bfloat16(spec) -> bool:
    types = (np.dtype(bool), BF, BF) if spec.name == "where" else (BF,) * spec.arity
    try:
        spec.dtype_rule(types)
    except TypeError:
        return False
    return True


BF_OPS = [name for name, spec in OPS.items() if _takes_bfloat16(spec)]
UNARY = [op for op in BF_OPS if OPS[op].arity == 1]
BINARY = [op for op in BF_OPS if OPS[op].arity == 2]

# bit patterns worth meeting: +-0, +-inf, NaNs (quiet, signalling, negative), subnormals, the
# smallest normal, the largest finite, small integers and halves
SPECIAL = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x0001, 0x807F, 0x0080, 0x8080, 0x7F7F,
           0xFF7F, 0x3F80, 0xBF80, 0x4000, 0x3F00, 0x4040, 0xC0A0, 0x3FC0, 0x4120, 0x42C8]
PATTERNS = st.one_of(st.sampled_from(SPECIAL), st.integers(0, 0xFFFF),
                     st.integers(0x3C00, 0x4300), st.integers(0xBC00, 0xC300))     # magnitudes 2^-7 .. 2^7
PROFILE = settings(max_examples=25, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def bf16_arrays(n):
    return hnp.arrays(np.uint16, n, elements=PATTERNS).map(lambda bits: bits.view(BF))


def _ordered(a):
    """bfloat16 bit patterns as integers in the order of their values (+0 and -0 both 0)."""
    b = a.view(np.uint16).astype(np.int64)
    return np.where(b & 0x8000, -(b & 0x7FFF), b)


def assert_same(got, want, op, ulps=0):
    """got equals want bit for bit (NaN where want is NaN, of any payload and sign), or within `ulps`
    bfloat16 steps; bool and other results exactly."""
    assert got.dtype == want.dtype, (op, got.dtype, want.dtype)
    if want.dtype != BF:
        np.testing.assert_array_equal(got, want, err_msg=op)
        return
    got32, want32 = got.astype(np.float32), want.astype(np.float32)
    nan = np.isnan(want32)
    assert (np.isnan(got32) == nan).all(), f"{op}: NaN at {np.flatnonzero(np.isnan(got32) != nan)[:5]}"
    steps = np.abs(_ordered(got[~nan]) - _ordered(want[~nan]))
    if ulps == 0:     # (also -0.0 against +0.0)
        same = got[~nan].view(np.uint16) == want[~nan].view(np.uint16)
    else:
        same = steps <= ulps
    bad = np.flatnonzero(~same)
    assert same.all(), f"{op}: got {got[~nan][bad[:6]]} want {want[~nan][bad[:6]]}"


def _reference(op, *args):
    """ml_dtypes' loop of the op; sigmoid, which is no ufunc, computed in float32 and rounded once
    (its reference composed of bfloat16 ops would round three times)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if op == "sigmoid":
            return np.asarray(OPS[op].reference(*(a.astype(np.float32) for a in args))).astype(BF)
        return np.asarray(OPS[op].reference(*args))


@pytest.fixture
def interpreter_only(monkeypatch):
    """Every elementwise call on the CPU runs through the interpreter tier (NumPy with ml_dtypes)."""
    backend = backend_for("cpu")
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    monkeypatch.setattr(backend, "kernels", KernelCache())
    monkeypatch.setattr(backend.compiler, "submit", lambda key, job: None)
    return backend


def _check_ops(a, b):
    """Every unary op of a and binary op of (a, b), evaluated together (one kernel per arity)."""
    x, y = lt.asarray(a), lt.asarray(b)
    unary = lt.evaluate(*[getattr(np, op)(x) if hasattr(np, op) else getattr(lt, op)(x) for op in UNARY])
    binary = lt.evaluate(*[getattr(np, op)(x, y) for op in BINARY])
    cond = lt.asarray(a.view(np.uint16) & 1 == 1)
    chosen = lt.evaluate(lt.where(cond, x, y))
    for op, got in zip(UNARY, unary):
        assert_same(got.numpy(), _reference(op, a), op, ULPS if op in TRANSCENDENTAL else 0)
    for op, got in zip(BINARY, binary):
        assert_same(got.numpy(), _reference(op, a, b), op, ULPS if op in TRANSCENDENTAL else 0)
    assert_same(chosen.numpy(), np.where(cond.numpy(), a, b), "where")


@PROFILE
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(bf16_arrays(n), bf16_arrays(n))))
def test_every_op_against_ml_dtypes_compiled(pair):
    _check_ops(*pair)


@PROFILE
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(bf16_arrays(n), bf16_arrays(n))))
def test_every_op_against_ml_dtypes_interpreted(interpreter_only, pair):
    _check_ops(*pair)


def test_every_bit_pattern_through_exact_ops():
    """All 65536 patterns against a shuffled copy: the exactly rounded arithmetic, bit for bit."""
    a = np.arange(1 << 16, dtype=np.uint16).view(BF)
    b = np.random.default_rng(0).permutation(a)
    x, y = lt.asarray(a), lt.asarray(b)
    ops = ["add", "subtract", "multiply", "true_divide", "maximum", "minimum", "nextafter", "copysign"]
    got = lt.evaluate(*[getattr(np, op)(x, y) for op in ops], np.sqrt(x), lt.relu(x), x * 0.1 + 3)
    for op, g in zip(ops, got):
        assert_same(g.numpy(), _reference(op, a, b), op)
    assert_same(got[-3].numpy(), _reference("sqrt", a), "sqrt")
    assert_same(got[-2].numpy(), _reference("relu", a), "relu")
    assert_same(got[-1].numpy(), _reference("add", _reference("multiply", a, 0.1), 3), "x * 0.1 + 3")


def test_broadcast_mixed_with_float32_and_strided():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 1, 5)).astype(BF)
    b = rng.standard_normal((4, 1)).astype(np.float32)
    c = rng.standard_normal((4, 10)).astype(BF)[:, ::2]
    got = lt.asarray(a) * lt.asarray(b) + lt.asarray(c)
    want = a * b + c
    assert want.dtype == np.float32 and got.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(got), want)
    y = lt.zeros((3, 4, 5), dtype=lt.bfloat16)
    y[...] = lt.asarray(a) * 2 + lt.asarray(c)
    assert_same(y.numpy(), (a * 2 + c).astype(BF), "into a bfloat16 destination")


# -- dtypes, promotion, casts ---------------------------------------------------------------

def test_the_name_is_ml_dtypes_bfloat16():
    assert lt.bfloat16 is ml_dtypes.bfloat16
    assert np.dtype(lt.bfloat16) == BF and BF in ALL_DTYPES
    x = lt.zeros((2, 3), dtype=lt.bfloat16)
    assert x.dtype == BF and x.numpy().dtype == BF and x.nbytes == 12
    assert lt.ones(3, dtype="bfloat16").dtype == BF


@pytest.mark.parametrize("other", ALL_DTYPES, ids=lambda d: d.name)
def test_promotion_is_numpys_with_ml_dtypes(other):
    """bfloat16 with float16 -> float32; with int8/uint8/bool -> bfloat16; wider ints -> float32 or
    float64; Python scalars are weak (NEP 50): the table in docs/guide/dtypes.md."""
    a = np.ones(2, BF)
    b = np.ones(2, other)
    for x, y in ((a, b), (b, a)):
        got = lt.asarray(x) + lt.asarray(y)
        assert got.dtype == (x + y).dtype == np.result_type(x.dtype, y.dtype)
        np.testing.assert_array_equal(np.asarray(got), x + y)
    assert (lt.asarray(a) * 3).dtype == BF and (lt.asarray(a) + 2.5).dtype == BF
    assert (lt.asarray(a) > 1).dtype == bool


def test_promotion_table():
    expected = {"bool": BF, "int8": BF, "uint8": BF, "int16": np.float32, "uint16": np.float32,
                "int32": np.float64, "uint32": np.float64, "int64": np.float64, "uint64": np.float64,
                "float16": np.float32, "float32": np.float32, "float64": np.float64, "bfloat16": BF}
    for other in ALL_DTYPES:
        got = (lt.ones(2, dtype=lt.bfloat16) + lt.ones(2, dtype=other)).dtype
        assert got == np.dtype(expected[other.name]), other


@given(hnp.arrays(np.float64, 30, elements=st.floats(allow_nan=True, allow_infinity=True, width=64)))
@settings(max_examples=30, deadline=None)
def test_casts_round_as_ml_dtypes(values):
    """float64 rounds once to bfloat16 (not through float32); a Python float in an op through float32,
    as NumPy does; bfloat16 to integers truncates, 0 out of range (ml_dtypes')."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = values.astype(BF)
        got = lt.asarray(values).astype(lt.bfloat16).numpy()
        assert_same(got, want, "float64 -> bfloat16")
        for dst in ALL_DTYPES:
            assert_same(lt.asarray(want).astype(dst).numpy(), want.astype(dst), f"bfloat16 -> {dst}")
            if dst != BF and dst.kind != "f":
                src = want.astype(dst)
                assert_same(lt.asarray(src).astype(lt.bfloat16).numpy(), src.astype(BF), f"{dst} -> bfloat16")


def test_python_scalars_round_through_float32_as_numpy():
    v = 1 + 2 ** -8 + 2 ** -30          # float32 rounds it to the tie 1 + 2^-8, which bfloat16 rounds to 1
    a = np.zeros(1, BF)
    assert_same((lt.asarray(a) + v).numpy(), a + v, "weak float")
    big = 2 ** 40 + 2 ** 32 + 1         # a Python int rounds once
    assert_same((lt.asarray(a) + big).numpy(), a + big, "weak int")


def test_finfo_and_same_kind_casts():
    info = lt.asarray(np.ones(1, BF)).__array_namespace__().finfo(lt.bfloat16)
    want = ml_dtypes.finfo(BF)
    assert info.bits == 16 and info.dtype == BF
    assert (info.eps, info.max, info.min, info.smallest_normal) == (float(want.eps), float(want.max),
                                                                   float(want.min), float(want.smallest_normal))
    y = lt.zeros(3, dtype=lt.bfloat16)
    y[...] = lt.ones(3, dtype=lt.float32) * 1.5           # float32 into bfloat16: same kind, as NumPy
    assert_same(y.numpy(), np.full(3, 1.5, BF), "assign")
    with pytest.raises(TypeError, match="same_kind"):
        z = lt.zeros(3, dtype=lt.int32)
        z[...] = y


def test_views_indexing_and_printing():
    a = np.arange(24, dtype=np.float32).reshape(4, 6).astype(BF)
    x = lt.asarray(a)
    assert_same(x[1:, ::2].T.numpy(), np.ascontiguousarray(a[1:, ::2].T), "view")
    assert_same(np.asarray(x[lt.asarray(np.array([3, 0]))]), a[[3, 0]], "take")
    assert_same(np.asarray(x.reshape(-1)[::5] * 2), a.reshape(-1)[::5] * 2, "view op")
    assert "bfloat16" in repr(x) and repr(a.astype(np.float32)[0, 1]).split("(")[-1][:1] in str(x)
    assert float(x[1, 2]) == 8.0 and x[1, 2].numpy().dtype == BF
    y = lt.asarray(a.copy())
    y[1:3, 2] = 7
    b = a.copy(); b[1:3, 2] = 7
    assert_same(y.numpy(), b, "indexed write")
