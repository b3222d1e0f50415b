"""lt.evaluate(expr) against NumPy evaluating the same DAG eagerly (CPU).

Property tests draw random DAGs (lazytensor.testing.strategies.dags); explicit tests cover every op of the
op table with every dtype, on values that include NaN, +-inf, -0.0, subnormals and the integer
extremes; float16 (emulated on the CPU through uint16 bit patterns) is checked exhaustively.

Each new DAG structure compiles a numba kernel (0.1-1 s here), so the example counts are modest;
raise them with LT_PROPERTY_EXAMPLES for a long hunt. Arrays are small, so the serial kernel
variant runs, in the float16 sweeps too (65536 elements).
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from lazytensor.kernels.ops import DTYPES, OPS
from lazytensor.testing.oracle import BOOL, Node, Refused, _text, assert_matches, build, build_astype, build_clip
from lazytensor.testing.strategies import dags, float_specials, int_specials

EXAMPLES = int(os.environ.get("LT_PROPERTY_EXAMPLES", "70"))

settings.register_profile(
    "lazytensor-cpu",
    max_examples=EXAMPLES,
    deadline=None,                     # the first example of a structure includes a numba compile
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=True,
)
PROFILE = settings.get_profile("lazytensor-cpu")


# -- random DAGs ---------------------------------------------------------------------------------

@PROFILE
@given(dags())
def test_random_dag_matches_numpy(dag):
    got = lt.evaluate(dag.expr)
    assert isinstance(got, lt.Tensor) and got.device == "cpu"
    assert_matches(got.numpy(), dag.expected, dag.err, repr(dag))


@settings(PROFILE, max_examples=max(10, EXAMPLES // 3))
@given(dags(max_ops=4), st.sampled_from(["strided", "reversed", "transposed"]))
def test_random_dag_into_a_view(dag, kind):
    """y[...] = expr into a non-contiguous destination: only the view's elements change."""
    shape = dag.expected.shape
    if kind == "transposed":
        buf = np.full(shape[::-1], 7, dag.dtype)
        view = buf.T
    elif kind == "strided" and shape:
        buf = np.full(shape[:-1] + (2 * shape[-1] + 1,), 7, dag.dtype)
        view = buf[..., 1::2]
    else:
        buf = np.full(shape, 7, dag.dtype)
        view = buf[::-1] if shape else buf
    before = buf.copy()
    y = lt.asarray(view)
    assert np.shares_memory(y.data, buf) or view.size == 0
    y[...] = dag.expr
    assert_matches(view, dag.expected, dag.err, repr(dag))
    mask = np.zeros(buf.shape, bool)          # where the view lies in its buffer
    if kind == "strided" and shape:
        mask[..., 1::2] = True
    else:
        mask[...] = True
    np.testing.assert_array_equal(buf[~mask], before[~mask])


# -- every op x every dtype ------------------------------------------------------------------------

def _values(dtype, n=24, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return np.array([True, False] * (n // 2), bool)
    if dtype.kind in "iu":
        ii = np.iinfo(dtype)
        special = int_specials(dtype)
        rest = rng.integers(max(ii.min, -100), min(ii.max, 100), n - len(special), endpoint=True)
        return np.concatenate([np.array(special, dtype), rest.astype(dtype)])
    special = float_specials(dtype)
    rest = np.concatenate([rng.normal(0, 3, (n - len(special)) // 2),
                           rng.uniform(-1e4, 1e4, n - len(special) - (n - len(special)) // 2)])
    with np.errstate(over="ignore"):
        return np.concatenate([np.array(special, np.float64), rest]).astype(dtype)


def _leaf(values):
    return Node(lt.asarray(values), values, 0.0, f"t[{values.dtype.name}{list(values.shape)}]")


UNARY = sorted(name for name, spec in OPS.items() if spec.arity == 1)
BINARY = sorted(name for name, spec in OPS.items() if spec.arity == 2)


def _check(op, args):
    """Build op(*args) with lazytensor and NumPy; when NumPy refuses the dtypes, `build` asserts that
    lazytensor raised the same error type while building the node (and nothing is evaluated)."""
    try:
        node = build(op, args)
    except Exception as exc:
        if isinstance(exc, Refused):
            return None       # NumPy refuses this dtype and lazytensor raised the same error type
        raise
    got = lt.evaluate(node.lt).numpy()
    assert_matches(got, node.np, node.err, f"{op}({', '.join(map(_text, args))})")
    return node


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("op", UNARY)
def test_unary_op(op, dtype):
    _check(op, [_leaf(_values(dtype))])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("op", BINARY)
def test_binary_op_all_pairs(op, dtype):
    """Every pair of the special and random values: a column against a row (broadcasting)."""
    v = _values(dtype)
    a = _leaf(v.reshape(-1, 1))
    b = _leaf(v[::-1].copy().reshape(1, -1))
    _check(op, [a, b])


# Each scalar with the tensor dtype that makes it interesting (a compile per op, scalar type and
# dtype, so not the full product): weak ints in and out of range, weak floats with float16, a
# weak bool, strong NumPy scalars that promote.
SCALAR_CASES = [(2, "int8"), (-1, "uint8"), (300, "int8"), (2**63, "uint64"), (2**64 - 1, "int64"),
                (-2**63 - 1, "int64"), (2**63, "bool"), (2.5, "float16"), (np.nan, "float32"), (-0.0, "float64"),
                (1e300, "float32"), (True, "int8"), (np.float32(1.5), "int16"), (np.int8(-3), "uint8"),
                (np.uint64(2**64 - 1), "int64"), (np.float64(0.1), "float16")]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("scalar,dtype", SCALAR_CASES, ids=lambda v: repr(v))
def test_binary_op_with_scalars(op, scalar, dtype):
    """NEP 50: weak Python scalars and strong NumPy scalars, on either side (reflected forms);
    out-of-range Python ints raise OverflowError exactly where NumPy raises it."""
    x = _leaf(_values(dtype, n=20))
    _check(op, [x, scalar])
    _check(op, [scalar, x])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_where(dtype):
    v = _values(dtype)
    cond = _leaf(np.arange(v.size) % 3 == 0)
    _check("where", [cond, _leaf(v), _leaf(v[::-1].copy())])
    _check("where", [_leaf(v), _leaf(v[::-1].copy()), 0])       # non-bool condition: truthiness


@pytest.mark.parametrize("dst", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("src", DTYPES, ids=lambda d: d.name)
def test_astype(src, dst):
    """Every conversion, rounding and wrapping as NumPy casts (float -> int of NaN, inf or
    out-of-range values is undefined in C and NumPy, and not compared)."""
    x = _leaf(_values(src, n=40))
    node = build_astype(x, dst)
    got = lt.evaluate(node.lt).numpy()
    assert_matches(got, node.np, node.err, f"{src.name} -> {dst.name}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_clip_and_unary_operators(dtype):
    v = _values(dtype)
    t = lt.asarray(v)
    with np.errstate(all="ignore"):
        if dtype != BOOL:
            for lo, hi in ((v[3], v[5]), (None, v[1]), (v[::-1].copy(), np.roll(v, 5)), (-1, 2)):
                node = build_clip(_leaf(v), _leaf(lo) if isinstance(lo, np.ndarray) else lo,
                                  _leaf(hi) if isinstance(hi, np.ndarray) else hi)
                assert_matches(lt.evaluate(node.lt).numpy(), node.np, node.err, node.text)
            assert_matches(lt.evaluate(-t).numpy(), -v, 0.0, "-t")
        assert_matches(lt.evaluate(abs(t)).numpy(), np.abs(v), 0.0, "abs(t)")
        if dtype.kind != "f":
            assert_matches(lt.evaluate(~t).numpy(), ~v, 0.0, "~t")


# -- float16: emulated through uint16 bit patterns on the CPU ---------------------------------------

ALL_HALVES = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def _same_halves(got, want, what):
    """Bit-identical, except that every NaN is one NaN (payloads are not preserved)."""
    got, want = np.asarray(got, np.float16), np.asarray(want, np.float16)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{what}: NaN positions")
    gb, wb = got.view(np.uint16), want.view(np.uint16)
    bad = ~nan & (gb != wb)
    if bad.any():
        i = np.flatnonzero(bad)[:5]
        raise AssertionError(f"{what}: {int(bad.sum())} differ, e.g. inputs at {i}: "
                             f"lazytensor {got[i]!r} vs NumPy {want[i]!r}")


@pytest.mark.parametrize("wide", [np.float32, np.float64])
def test_float16_widening_is_exact_for_all_bit_patterns(wide):
    got = lt.evaluate(lt.asarray(ALL_HALVES).astype(wide)).numpy()
    want = ALL_HALVES.astype(wide)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))


@pytest.mark.parametrize("wide", [np.float32, np.float64])
def test_float16_roundtrip_all_bit_patterns(wide):
    """half -> wide -> half is the identity for every bit pattern (NaN stays NaN)."""
    wide_values = lt.asarray(ALL_HALVES.astype(wide))
    got = lt.evaluate(wide_values.astype(np.float16)).numpy()
    _same_halves(got, ALL_HALVES, f"{np.dtype(wide).name} -> float16")


def _ties_and_neighbours(wide):
    """Midpoints between consecutive finite halves (exact ties, round half to even), the values
    one wide ULP either side of them, and the overflow boundary 65504 .. 65520."""
    h = ALL_HALVES[np.isfinite(ALL_HALVES)].astype(np.float64)
    h = np.unique(h)
    mids = (h[:-1] + h[1:]) / 2                           # exact in float32 and float64
    mids = mids.astype(wide)
    up = np.nextafter(mids, np.array(np.inf, wide))
    down = np.nextafter(mids, np.array(-np.inf, wide))
    edge = np.array([65504, 65519, 65519.996, 65520, 65520.004, 65536, 1e6, 2.0**-24, 2.0**-25,
                     2.0**-25 * 1.0000001, 2.0**-26, 3 * 2.0**-25, 6.1e-5, 6.103515625e-05], np.float64)
    edge = np.concatenate([edge, -edge]).astype(wide)
    return np.concatenate([mids, up, down, edge])


@pytest.mark.parametrize("wide", [np.float32, np.float64])
def test_float16_rounding_of_ties_subnormals_and_overflow(wide):
    x = _ties_and_neighbours(wide)
    got = lt.evaluate(lt.asarray(x).astype(np.float16)).numpy()
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    _same_halves(got, want, f"{np.dtype(wide).name} -> float16 ties")


@pytest.mark.parametrize("wide", [np.float32, np.float64])
def test_float16_rounding_of_random_values(wide):
    rng = np.random.default_rng(16)
    bits = rng.integers(0, 2**32 if wide == np.float32 else 2**63, 200_000, dtype=np.uint64)
    x = (bits.astype(np.uint32).view(np.float32) if wide == np.float32 else bits.view(np.float64))
    # Mostly values in half's range (uniform bit patterns would be nearly all 0 or inf).
    scaled = (rng.standard_normal(200_000) * np.exp2(rng.uniform(-30, 17, 200_000))).astype(wide)
    x = np.concatenate([x.astype(wide), scaled])
    with np.errstate(all="ignore"):
        want = x.astype(np.float16)
    got = lt.evaluate(lt.asarray(x).astype(np.float16)).numpy()
    _same_halves(got, want, f"random {np.dtype(wide).name} -> float16")


@pytest.mark.parametrize("op", ["add", "multiply", "true_divide", "subtract"])
def test_float16_arithmetic_all_bit_patterns(op):
    """Every half against a few others: NumPy computes in float32 and rounds once, so must we."""
    a = lt.asarray(ALL_HALVES.reshape(1, -1))
    others = np.array([1.0, -0.1, 3.0, 1e-7, 65504, 0.3333, -0.0, np.inf], np.float16).reshape(-1, 1)
    b = lt.asarray(others)
    with np.errstate(all="ignore"):
        want = getattr(np, op)(ALL_HALVES.reshape(1, -1), others)
    node = {"add": lambda: a + b, "multiply": lambda: a * b, "true_divide": lambda: a / b,
            "subtract": lambda: a - b}[op]()
    got = lt.evaluate(node).numpy()
    assert got.dtype == np.float16
    _same_halves(got.ravel(), want.ravel(), f"float16 {op}")


@pytest.mark.parametrize("op", ["sqrt", "floor", "ceil", "negative", "absolute", "sign", "relu", "rint", "trunc",
                                "fabs", "reciprocal"])
def test_float16_exact_unary_all_bit_patterns(op):
    t = lt.asarray(ALL_HALVES)
    with np.errstate(all="ignore"):
        want = OPS[op].reference(ALL_HALVES)
    got = lt.evaluate(getattr(lt, op)(t)).numpy()
    if op == "relu":
        # relu(-0.0) is a tie of -0.0 and 0: its zero's sign is unspecified (see lazytensor.testing.oracle)
        keep = ALL_HALVES.view(np.uint16) != 0x8000
        got, want = got[keep], want[keep]
    _same_halves(got, want, f"float16 {op}")


def test_float16_scalar_arguments_round_to_nearest_even():
    """A Python float with a float16 tensor is rounded to half as NumPy does (weak scalar)."""
    t = lt.asarray(np.zeros(1, np.float16))
    for v in [0.1, 65519.0, 65520.0, 2.0**-25, 3 * 2.0**-25, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, -0.0, 1e-9]:
        with np.errstate(all="ignore"):
            want = np.zeros(1, np.float16) + v
        got = lt.evaluate(t + v).numpy()
        _same_halves(got, want, f"float16 + {v!r}")
