"""Reductions vs NumPy: sum mean prod max min any all var std argmax argmin.

Oracle and tolerances. Integer and bool results are compared exactly with NumPy's own result
(integer sums and products wrap modulo 2**bits in both, whatever the order). max/min/argmax/argmin
/any/all select or compare, so they are exact for floats too. Float sums, means, products and
moments are compared with a float64 NumPy reference computed on the float64 copy of the input,
not with NumPy's result in the input dtype: lazytensor accumulates floats in float64, NumPy
sums pairwise in the input dtype, so both are within rounding of the exact value but not of each
other. The bound for `ours` vs the float64 reference is
    eps_out * |ref| + smallest_subnormal_out       rounding the float64 result to the output dtype
  + (n + 2) * eps64 * scale                         float64 accumulation in any order
where scale is sum(|x|) (sum), mean(|x|) (mean), |prod| (prod), mean(x**2) (var, std: the
Welford/Chan update is backward stable in terms of the second moment). The second term is tiny; a
float32 or float16 accumulator would exceed this bound on the cancelling sums drawn below, so
the test also pins the accumulation precision the design promises.

Kernel compiles dominate the run time (numba, ~1.5 s each, cached on disk under
LAZYTENSOR_CACHE_DIR): the kind x dtype matrix rotates the axis form and dtype= through the
pairs so every kind meets every dtype once, and every spelling of the same normalized axes
(negative ints, tuples in any order, keepdims) reuses one kernel.
"""
from __future__ import annotations

import warnings

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from lazytensor.kernels.ops import DTYPES

KINDS = ("sum", "mean", "prod", "max", "min", "any", "all", "var", "std", "argmax", "argmin")
WITH_DTYPE = ("sum", "prod", "mean", "var", "std")
EXACT = ("max", "min", "any", "all", "argmax", "argmin")
F64 = np.dtype(np.float64)
SHAPE = (3, 5, 7)

# Spellings of one normalized axis set on a 3-d input: each list runs one kernel.
AXIS_FORMS = [
    [-1, 2, (2,), (-1,)],
    [None, (0, 1, 2), (2, -3, 1)],
    [0, -3, (0,)],
    [(0, 2), (2, 0), (-1, -3)],
    [1, -2, (1,)],
]
ARG_AXIS_FORMS = [[-1, 2], [None], [0, -3], [1, -2]]


def _values(dtype, shape, rng):
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.kind in "iu":
        ii = np.iinfo(dtype)
        v = rng.integers(max(ii.min, -9), min(ii.max, 9) + 1, size=n).astype(dtype)
        # extremes too: identities of max/min must not win over them, and sums wrap like NumPy's
        k = min(n, 3)
        v[rng.choice(n, k, replace=False)] = rng.choice(np.array([ii.min, ii.max, ii.max - 1], dtype), k)
        return v.reshape(shape)
    # cancelling values: |sum| << sum(|x|), where the accumulator's precision shows
    return np.asarray(rng.standard_normal(shape) * 4).astype(dtype)


def _reference64(kind, x, axis, keepdims, ddof=0):
    """(float64 reference, scale, n) for the float-valued kinds."""
    x64 = x.astype(F64)
    axes = tuple(range(x.ndim)) if axis is None else axis
    n = int(np.prod([x.shape[a] for a in np.atleast_1d(axes)])) if x.ndim else 1
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if kind == "sum":
            return np.sum(x64, axis, keepdims=keepdims), np.sum(np.abs(x64), axis, keepdims=keepdims), n
        if kind == "mean":
            return np.mean(x64, axis, keepdims=keepdims), np.mean(np.abs(x64), axis, keepdims=keepdims), n
        if kind == "prod":
            ref = np.prod(x64, axis, keepdims=keepdims)
            return ref, np.abs(ref), n
        m2 = np.mean(x64 * x64, axis, keepdims=keepdims)
        if kind == "var":
            return np.var(x64, axis, ddof=ddof, keepdims=keepdims), m2, n
        return np.std(x64, axis, ddof=ddof, keepdims=keepdims), np.sqrt(m2), n


def _assert_close(ours, ref, scale, n, out_dtype, what, inputs_rounded=False):
    ours = np.asarray(ours)
    assert ours.dtype == out_dtype, f"{what}: dtype {ours.dtype}, NumPy {out_dtype}"
    assert ours.shape == np.shape(ref), f"{what}: shape {ours.shape}, NumPy {np.shape(ref)}"
    fi = np.finfo(out_dtype)
    a = ours.astype(F64)
    with np.errstate(all="ignore"):
        r = np.asarray(ref, F64).astype(out_dtype).astype(F64)     # the reference in the output dtype
        tol = fi.eps * np.abs(r) + float(fi.smallest_subnormal) + (n + 2) * np.finfo(F64).eps * scale
        if inputs_rounded:
            tol = tol + (n + 2) * fi.eps * scale
        ok = (np.abs(a - r) <= tol) | (a == r) | (np.isnan(a) & np.isnan(r))
    assert ok.all(), (f"{what}: {int((~ok).sum())} of {ok.size} differ; first: ours {a[~ok][:3]}, "
                      f"reference {r[~ok][:3]}, bound {np.broadcast_to(tol, ok.shape)[~ok][:3]}")


def _numpy(kind, x, axis, keepdims, dtype=None, ddof=0):
    kw = {"keepdims": keepdims}
    if dtype is not None:
        kw["dtype"] = dtype
    if kind in ("var", "std"):
        kw["ddof"] = ddof
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(getattr(np, kind)(x, axis=axis, **kw))


def _ours(kind, t, axis, keepdims, dtype=None, ddof=0, form="method"):
    kw = {"keepdims": keepdims}
    if dtype is not None:
        kw["dtype"] = dtype
    if kind in ("var", "std") and ddof:
        kw["ddof"] = ddof
    f = getattr(t, kind) if form == "method" else (lambda **k: getattr(lt, kind)(t, **k))
    return f(axis=axis, **kw).numpy()


def check(kind, x, axis, keepdims=False, dtype=None, ddof=0, form="method", t=None):
    """One reduction of the NumPy array x (or of the lazytensor operand t whose value is x) vs NumPy."""
    t = lt.asarray(x) if t is None else t
    expected = _numpy(kind, x, axis, keepdims, dtype, ddof)
    ours = _ours(kind, t, axis, keepdims, dtype, ddof, form)
    what = f"{kind}({x.dtype}{list(x.shape)}, axis={axis}, keepdims={keepdims}, dtype={dtype}, ddof={ddof})"
    assert ours.dtype == expected.dtype, f"{what}: dtype {ours.dtype}, NumPy {expected.dtype}"
    assert ours.shape == expected.shape, f"{what}: shape {ours.shape}, NumPy {expected.shape}"
    if kind in EXACT or expected.dtype.kind != "f":
        np.testing.assert_array_equal(ours, expected, err_msg=what)
        return
    ref, scale, n = _reference64(kind, x, axis, keepdims, ddof)
    # dtype=float32 (say) on int64 extremes: NumPy rounds each input to float32 first, lazytensor
    # converts it to its float64 accumulator; either is within eps_out of each input, hence this term.
    rounded = not np.array_equal(x.astype(expected.dtype).astype(F64), x.astype(F64))
    _assert_close(ours, ref, scale, n, expected.dtype, what, inputs_rounded=rounded)


# -- every kind x every dtype x axis forms x keepdims x dtype= -----------------------------------

def _dtype_options(kind, src):
    if kind in ("sum", "prod"):
        return [None, np.float64, np.float32] + ([np.int64, np.uint64] if src.kind in "biu" else [])
    if kind in ("mean", "var", "std"):
        return [None, np.float64, np.float32]
    return [None]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("kind", KINDS)
def test_kind_dtype_matrix(kind, dtype):
    ki, di = KINDS.index(kind), DTYPES.index(dtype)
    rng = np.random.default_rng(1000 * ki + di)
    x = _values(dtype, SHAPE, rng)
    forms = ARG_AXIS_FORMS if kind.startswith("arg") else AXIS_FORMS
    axes = forms[(ki + di) % len(forms)]
    options = _dtype_options(kind, dtype)
    out = options[(3 * ki + di) % len(options)]
    ddof = (ki + di) % 3 if kind in ("var", "std") else 0
    for axis in axes:
        for keepdims in (False, True):
            check(kind, x, axis, keepdims, out, ddof, form="method" if keepdims else "function")


@pytest.mark.parametrize("kind", KINDS)
def test_result_dtypes_and_shapes_everywhere(kind):
    """NumPy's result dtype and shape for every dtype, dtype= and axis spelling (built, not run)."""
    for src in DTYPES:
        x = np.ones((2, 3, 4), src)
        t = lt.asarray(x)
        options = [None] if kind not in WITH_DTYPE else [None, *DTYPES]
        for dt in options:
            for axis in ([None, 0, -1, 1] if kind.startswith("arg") else [None, 0, -1, (0, 2), (-1, 0), ()]):
                for keepdims in (False, True):
                    try:
                        expected = _numpy(kind, x, axis, keepdims, dt)
                    except TypeError:
                        continue          # NumPy refuses that dtype= (none here is expected to)
                    kw = {} if dt is None else {"dtype": dt}
                    node = getattr(lt, kind)(t, axis=axis, keepdims=keepdims, **kw)
                    assert (node.dtype, tuple(node.shape)) == (expected.dtype, expected.shape), \
                        f"{kind}({src}, axis={axis}, keepdims={keepdims}, dtype={dt})"


# -- hypothesis: shapes (0-d, size-1, odd) and axes ------------------------------------------------

@st.composite
def shapes_and_axes(draw, arg=False):
    """A shape of 0-3 dims (sizes 1 and odd) and an axis: None, an int (negative too), or a tuple."""
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.sampled_from([1, 2, 3, 5, 7])) for _ in range(ndim))
    choices = [None]
    if ndim:
        choices.append(draw(st.integers(-ndim, ndim - 1)))
    if not arg:
        axes = draw(st.permutations(range(ndim)))[:draw(st.integers(0, ndim))]
        choices.append(tuple(a - ndim if draw(st.booleans()) else a for a in axes))
    return shape, draw(st.sampled_from(choices))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kind=st.sampled_from(KINDS), dtype=st.sampled_from([np.float64, np.int32, np.bool_]))
def test_drawn_shapes_and_axes(data, kind, dtype):
    shape, axis = data.draw(shapes_and_axes(arg=kind.startswith("arg")))
    keepdims = data.draw(st.booleans())
    x = _values(dtype, shape, np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))))
    ddof = data.draw(st.integers(0, 2)) if kind in ("var", "std") else 0
    check(kind, x, axis, keepdims, ddof=ddof)


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_drawn_expression_feeding_a_reduction(data):
    """A reduction of an elementwise expression (drawn shapes/axes) equals NumPy's of the same values."""
    shape, axis = data.draw(shapes_and_axes())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a, b = rng.standard_normal(shape), rng.standard_normal(shape)
    kind = data.draw(st.sampled_from(["sum", "mean", "max", "var", "argmin"]))
    if kind == "argmin" and isinstance(axis, tuple):
        axis = None
    ta, tb = lt.asarray(a), lt.asarray(b)
    check(kind, (a - b) * (a - b), axis, t=(ta - tb) * (ta - tb))


# -- NaN, inf, empty, ddof, ties --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_nan_propagates(dtype):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(300).astype(dtype)
    x[[150, 200]] = np.nan                      # deep in a later chunk: chunk combination must keep it
    for kind in ("sum", "mean", "prod", "max", "min", "var", "std"):
        ours = getattr(lt.asarray(x), kind)().numpy()
        assert np.isnan(ours), kind
    assert lt.asarray(x).argmax().numpy() == 150 == np.argmax(x)   # the first NaN
    assert lt.asarray(x).argmin().numpy() == 150 == np.argmin(x)
    assert bool(lt.asarray(np.array([np.nan, 0], dtype)).any().numpy())   # NaN is true, as in NumPy
    assert bool(lt.asarray(np.array([np.nan, 1], dtype)).all().numpy())
    # along an axis: NaN only in some rows, at the start, middle and end of the reduced axis
    m = rng.standard_normal((4, 9)).astype(dtype)
    m[0, 0] = m[1, 4] = m[2, 8] = np.nan
    for kind in ("max", "min", "sum", "argmax", "argmin"):
        for axis in (0, 1):
            check(kind, m, axis)


def test_inf():
    x = np.array([1.0, np.inf, 2.0])
    check("sum", x, None)
    check("max", x, None)
    check("argmax", x, None)
    check("sum", np.array([np.inf, -np.inf, 1.0]), None)          # nan
    check("mean", np.array([np.inf, 1.0]), None)
    check("min", np.array([-np.inf, -np.inf]), None)
    check("max", np.array([-np.inf, -np.inf]), None)               # the identity is not a value
    check("argmax", np.array([-np.inf, -np.inf]), None)
    check("argmin", np.array([np.inf, np.inf, np.inf]), None)
    check("var", np.array([np.inf, 1.0]), None)


def test_empty_reductions():
    e = np.zeros((0,), np.float64)
    assert lt.asarray(e).sum().numpy() == 0 and lt.asarray(e).sum().numpy().dtype == np.float64
    assert lt.asarray(e).prod().numpy() == 1
    assert np.isnan(lt.asarray(e).mean().numpy())
    assert np.isnan(lt.asarray(e).var().numpy())
    assert lt.asarray(np.zeros(0, np.int8)).sum().numpy().dtype == np.int64
    assert not lt.asarray(np.zeros(0, bool)).any().numpy()
    assert lt.asarray(np.zeros(0, bool)).all().numpy()
    for kind, name in (("max", "maximum"), ("min", "minimum")):
        with pytest.raises(ValueError, match=f"^zero-size array to reduction operation {name} which has no identity$"):
            getattr(lt.asarray(e), kind)()
        with pytest.raises(ValueError, match="zero-size array"):
            getattr(lt.asarray(np.zeros((3, 0))), kind)(axis=1)
    for kind in ("argmax", "argmin"):
        with pytest.raises(ValueError, match=f"attempt to get {kind} of an empty sequence"):
            getattr(lt.asarray(e), kind)()
    # empty reduced axis, kept axes not empty: identities per row; empty kept axis: empty result
    z = np.zeros((3, 0), np.float32)
    for kind in ("sum", "prod", "mean", "any", "all"):
        check(kind, z, 1)
        check(kind, z, 1, keepdims=True)
    for kind in ("max", "min", "sum", "argmax"):
        check(kind, np.zeros((0, 3), np.float32), 1)


def test_zero_dim_and_empty_axis_tuple():
    s = np.asarray(np.float32(2.5))
    for kind in KINDS:
        check(kind, s, None)
        check(kind, s, None, keepdims=True)
    x = np.arange(6, dtype=np.int16).reshape(2, 3)
    for kind in ("sum", "max", "mean", "var"):
        check(kind, x, ())                       # axis=(): nothing reduced, NumPy's dtype


@pytest.mark.parametrize("ddof", [1, 6])     # 0 and 2 in the matrix; 6 >= n on every axis here
def test_var_std_ddof(ddof):
    rng = np.random.default_rng(ddof)
    x = rng.standard_normal((5, 6)) * 3 + 10        # an offset: one-pass variance must not cancel
    for kind in ("var", "std"):
        for axis in (None, 0, 1):
            check(kind, x, axis, ddof=ddof)        # ddof >= n: inf, as NumPy


def test_var_large_offset_is_accurate():
    x = (np.random.default_rng(3).standard_normal(10000) + 1e6).astype(np.float64)
    check("var", x, None)
    check("std", x, None)


def test_argmax_argmin_first_occurrence_on_ties():
    rng = np.random.default_rng(11)
    x = rng.integers(0, 3, size=500).astype(np.int32)       # ties everywhere, across chunks
    for kind in ("argmax", "argmin"):
        check(kind, x, None)
        check(kind, x.reshape(20, 25), 0)
        check(kind, x.reshape(20, 25), 1)
        check(kind, x.reshape(20, 25), None, keepdims=True)
    b = np.zeros(300, bool)
    b[[170, 250]] = True
    check("argmax", b, None)
    check("argmin", ~b, None)
    check("argmax", np.zeros(300, bool), None)              # all equal: index 0


def test_float16_sums_do_not_saturate():
    x = np.ones(5000, np.float16)                    # a float16 accumulator stops at 2048
    assert lt.asarray(x).sum().numpy() == np.float16(5000) == x.sum()
    assert lt.asarray(x).mean().numpy() == np.float16(1)


def test_argmax_refuses_tuple_axis_and_dtype():
    t = lt.asarray(np.ones((2, 3)))
    with pytest.raises(TypeError):
        t.argmax(axis=(0, 1))
    with pytest.raises(np.exceptions.AxisError):
        t.sum(axis=2)
    with pytest.raises(ValueError, match="duplicate"):
        t.sum(axis=(0, -2))


# -- fusion and planning ----------------------------------------------------------------------------

def test_expression_feeding_a_reduction_is_one_kernel():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 33)).astype(np.float32), rng.standard_normal((64, 33)).astype(np.float32)
    ta, tb = lt.asarray(a), lt.asarray(b)
    expr = ((ta - tb) ** 2).mean()
    assert "plan: 1 step\n" in lt.explain(expr, source=False)
    with lt.profile() as p:
        value = expr.numpy()
    assert p.launches == 1 and p.kernels[0].kind == "reduction", p
    ref = np.mean((a.astype(F64) - b.astype(F64)) ** 2)
    _assert_close(value, ref, np.mean((a.astype(F64) - b) ** 2), a.size, np.dtype(np.float32), "mse")
    with lt.profile() as p:
        s = lt.sum(lt.abs(ta * 2 - tb), axis=1).numpy()
    assert p.launches == 1
    np.testing.assert_allclose(s, np.sum(np.abs(a * 2 - b), axis=1), rtol=1e-5)


def _steps(text):
    return int(text.split("plan: ", 1)[1].split(" step", 1)[0])


def test_reduction_inside_a_larger_expression_is_two_steps():
    x = np.random.default_rng(1).standard_normal((40, 9))
    t = lt.asarray(x)
    for centred in (t - t.mean(axis=0), t - t.mean(axis=0, keepdims=True), t - lt.mean(t, axis=-2)):
        text = lt.explain(centred, source=False)
        assert _steps(text) == 2, text
        assert "FusedReduction" in text.split("[2]")[0] and "FusedElementwise" in text.split("[2]")[1], text
        with lt.profile() as p:
            got = centred.numpy()
        assert p.launches == 2
        np.testing.assert_allclose(got, x - x.mean(axis=0), rtol=1e-13, atol=1e-13)


def test_normalization_with_keepdims():
    """(x - mu) / sqrt(var + eps): two reductions and one elementwise step; keepdims adds no copy."""
    x = np.random.default_rng(2).standard_normal((50, 6)).astype(np.float32) * 3 + 1
    t = lt.asarray(x)
    mu = t.mean(axis=0, keepdims=True)
    var = t.var(axis=0, keepdims=True)
    y = (t - mu) / lt.sqrt(var + 1e-5)
    text = lt.explain(y, source=False)
    assert _steps(text) == 3 and text.count("FusedReduction") == 2 and "materialized" not in text, text
    x64 = x.astype(F64)
    ref = (x64 - x64.mean(0, keepdims=True)) / np.sqrt(x64.var(0, keepdims=True) + 1e-5)
    got = y.numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    out = lt.empty(x.shape, np.float32)
    out[...] = y
    np.testing.assert_array_equal(out.numpy(), got)


def test_reduction_result_assigned_into_a_view():
    x = np.random.default_rng(4).standard_normal((6, 5))
    y = np.zeros((3, 6))
    ty = lt.asarray(y.copy())
    ty[1] = lt.asarray(x).sum(axis=1)
    y[1] = x.sum(axis=1)
    np.testing.assert_allclose(ty.numpy(), y, rtol=1e-14, atol=1e-14)


# -- determinism ------------------------------------------------------------------------------------

def test_deterministic_over_runs_and_thread_counts():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1001, 131)).astype(np.float32)
    t = lt.asarray(x)
    exprs = [lambda: t.sum(), lambda: t.sum(axis=0), lambda: (t * t).mean(axis=1), lambda: t.var(axis=0),
             lambda: t.var()]
    first = [e().numpy() for e in exprs]
    for _ in range(3):
        for e, f in zip(exprs, first):
            assert e().numpy().tobytes() == f.tobytes()
    before = numba.get_num_threads()
    try:
        for n in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(n)
            for e, f in zip(exprs, first):
                assert e().numpy().tobytes() == f.tobytes(), f"differs with {n} threads"
    finally:
        numba.set_num_threads(before)
