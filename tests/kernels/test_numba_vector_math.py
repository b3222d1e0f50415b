"""The vectorizing float32 helpers of the generated numba kernels (kernels/cpu/numba_vector_math.py):
accuracy on a dense sample of every float32 bit pattern, NumPy's special values, that the kernels
calling them vectorize, and that only kernels using a helper carry it."""
import math
import platform

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.kernels.cpu.numba_vector_math import definitions_for
from lazytensor.kernels.program import Layout, program_for
from lazytensor.kernels.cpu.render_numba import render_numba

EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1.1754942e-38, 3e-4, 0.55, -0.55,
         0.7853982, 1.5707964, 3.1415927, 71476.0625, 16777216.0, 7.729179e28,
         0.5493061, 1.0, 8.0, 9.0, 9.01, 9.1, 10.0, 20.0, 88.7, 1e38, 3.4028235e38]


def float32_sample(step_bits: int = 10) -> np.ndarray:
    """2^(32 - step_bits) evenly spaced float32 bit patterns (both signs, subnormals, NaNs) and the
    edges with their neighbours."""
    bits = np.arange(0, 1 << 32, 1 << step_bits, dtype=np.uint64).astype(np.uint32)
    edges = np.array(EDGES, np.float32)
    with np.errstate(over="ignore"):
        near = [np.nextafter(edges, np.float32(s)) for s in (np.inf, -np.inf)]
    return np.concatenate([bits.view(np.float32), edges, *near])


def ordered(x: np.ndarray) -> np.ndarray:
    """float32 bit patterns as integers in the order of the values (-0.0 and 0.0 one apart)."""
    i = x.view(np.int32).astype(np.int64)
    return np.where(i < 0, -1 - (i & 0x7FFFFFFF), i)


def ulp_distance(got, want) -> np.ndarray:
    return np.abs(ordered(got) - ordered(want))


def check_close(got, want, max_ulps):
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), "NaN where the reference has none, or the reverse"
    d = ulp_distance(got[~nan], want[~nan])
    if not d.size:          # (a chunk of the patterns that is all NaN: nothing else to compare)
        return
    worst = int(d.argmax())
    assert d.max() <= max_ulps, (f"{d.max()} ulps at x = {float(np.asarray(got)[~nan][worst])!r}: "
                                 f"got {got[~nan][worst]!r}, want {want[~nan][worst]!r}")
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan])), "a sign differs (signed zeros)"


NAMES = ("tanh", "exp", "sigmoid", "log", "sin", "cos")
EXACT = {"tanh": np.tanh, "exp": np.exp, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "log": np.log,
         "sin": np.sin, "cos": np.cos}
ULPS = (1, 1, 2, 1, 1, 1)


def _numpy(name, x):
    from lazytensor.kernels.ops import OPS
    with np.errstate(all="ignore"):
        return OPS[name].reference(x)


def _all_three(x):
    """Each of NAMES of x from one kernel with an output each, in pieces small enough for
    the serial kernel (the parallel one compiles several times slower; both share the body)."""
    pieces = []
    for start in range(0, x.size, 60000):
        t = lt.asarray(x[start:start + 60000])
        pieces.append([r.numpy() for r in lt.evaluate(*(getattr(lt, name)(t) for name in NAMES))])
    return {name: np.concatenate([p[k] for p in pieces]) for k, name in enumerate(NAMES)}


def test_float32_within_an_ulp_or_two_of_the_rounded_float64_value():
    """Against the float64 function rounded to float32: tanh, exp, log, sin and cos within 1 ulp,
    sigmoid within 2 on normal results (NumPy's float32 reference is 0 where e^-x overflows, below 1e-38).
    NumPy's own float32 loops are 1 (tanh), 2 (exp) and 4 (log) ulps off the same reference: the
    oracle of the random-DAG tests allows 8."""
    x = float32_sample()
    results = _all_three(x)
    for name, ulps in zip(NAMES, ULPS):
        got = results[name]
        with np.errstate(all="ignore"):
            want = EXACT[name](x.astype(np.float64)).astype(np.float32)
        keep = ~((np.abs(want) < np.finfo(np.float32).tiny) & (name == "sigmoid"))
        check_close(got[keep], want[keep], ulps)
        check_close(got, _numpy(name, x), 8)
        if name in ("tanh", "exp", "log"):          # (sigmoid's reads -x; NumPy's sin and cos give the default NaN)
            nan_in = np.isnan(x)
            assert np.array_equal(got[nan_in].view(np.uint32), x[nan_in].view(np.uint32)), "a NaN comes back as it came"


def test_float16_within_1_ulp_of_numpy_on_every_pattern():
    """float16 loops use the float32 helpers and round once, as NumPy's float16 tanh and exp do
    (sigmoid's reference, which rounds after each float16 op and so is 0 below -11, is taken in
    float32 and rounded once, as the kernels have always computed it)."""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    results = _all_three(x)
    for name in NAMES:
        got = results[name]
        want = _numpy(name, x.astype(np.float32)).astype(np.float16) if name == "sigmoid" else _numpy(name, x)
        assert got.dtype == np.float16
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan), name
        i, j = (ordered16(v[~nan]) for v in (got, want))
        assert np.abs(i - j).max() <= 1, name


def ordered16(x):
    i = x.view(np.int16).astype(np.int64)
    return np.where(i < 0, -1 - (i & 0x7FFF), i)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=300),
       st.sampled_from(NAMES))
def test_in_a_fused_kernel_within_3_ulps(values, name):
    """f(x * 0.5 + y) * 2 against f in float64 of the same float32 argument, rounded."""
    f32 = np.float32
    x = np.array(values, f32)
    y = np.linspace(-3, 3, x.size).astype(f32)
    got = lt.evaluate(getattr(lt, name)(lt.asarray(x) * 0.5 + lt.asarray(y)) * 2).numpy()
    with np.errstate(all="ignore"):
        want = EXACT[name]((x * f32(0.5) + y).astype(np.float64)).astype(f32) * f32(2)
    assert got.dtype == want.dtype
    np.testing.assert_array_max_ulp(got, want, maxulp=3)


def test_only_kernels_calling_a_helper_carry_its_definition():
    a32 = lt.asarray(np.linspace(-2, 2, 64, dtype=np.float32))
    a64 = lt.asarray(np.linspace(-2, 2, 64))
    src32 = str(lt.explain(lt.tanh(a32) + 1))
    assert "def lt_tanh_f32(x):" in src32 and "def lt_exp_neg2_f32(h):" in src32
    assert src32.index("def lt_exp_neg2_f32") < src32.index("def lt_tanh_f32") < src32.index("def kernel_par")
    src64 = str(lt.explain(lt.tanh(a64) + 1))
    assert "np.tanh(" in src64 and "lt_tanh_f32" not in src64
    assert "def lt_" not in str(lt.explain(a32 * 2 + 1))     # other kernels keep their text (and names)
    assert definitions_for("v1 = np.exp(v0)") == []
    assert "def lt_exp_f32(x):" in str(lt.explain(lt.sigmoid(a32)))


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86 assembly")
def test_the_kernel_loop_vectorizes_and_calls_no_libm():
    """v = tanh(a * b) * sigmoid(b) + exp(a); w = v + log(v); sin(cos(w)) + w over float32: the
    parallel loop holds packed float32 multiplies and no call of libm's tanhf, expf, logf, floorf,
    sinf or cosf."""
    import numba
    f32 = np.dtype(np.float32)
    program = program_for((("load", f32, 0), ("load", f32, 1), ("multiply", f32, 0, 1), ("tanh", f32, 2),
                           ("sigmoid", f32, 1), ("multiply", f32, 3, 4), ("exp", f32, 0), ("add", f32, 5, 6),
                           ("log", f32, 7), ("add", f32, 7, 8), ("sin", f32, 9), ("cos", f32, 10),
                           ("add", f32, 11, 9)), 2, (), f32)
    source = render_numba(program, Layout(1, True)).replace("cache=True", "cache=False")
    module = {}
    exec(compile(source, "<kernel>", "exec"), module)
    fn = module["kernel_par"]
    array = numba.types.Array(numba.float32, 1, "C")
    fn.compile((array, array, array))
    asm = fn.inspect_asm(fn.signatures[0])
    for libm in ("tanhf", "expf", "logf", "floorf", "sinf", "cosf"):
        assert f"${libm}" not in asm, f"the kernel calls libm's {libm}"
    assert not [line for line in asm.splitlines() if "call" in line and "lt_" in line], "a helper is not inlined"
    assert "mulps" in asm                       # packed float32 multiplies: the loop is vectorized


def test_a_stride_0_input_is_read_as_broadcast():
    """The gradient of a sum broadcasts its seed with stride 0: the kernel must read it once, not
    as a strided array (which keeps the loop from vectorizing)."""
    rng = np.random.default_rng(0)
    a, b = (lt.asarray(rng.standard_normal(1000).astype(np.float32)) for _ in range(2))
    ga, gb = lt.grad(lt.sum(lt.tanh(a * b)), [a, b])
    text = str(lt.explain([ga, gb]))
    assert "in0[0]" in text and "in0[i0]" not in text
    t = np.tanh(a.numpy() * b.numpy())
    got_a, got_b = lt.evaluate(ga, gb)
    np.testing.assert_allclose(got_a.numpy(), (1 - t * t) * b.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_b.numpy(), (1 - t * t) * a.numpy(), rtol=1e-5, atol=1e-6)


@settings(max_examples=10, deadline=None)
@given(st.tuples(st.integers(1, 5), st.integers(1, 6)), st.tuples(st.booleans(), st.booleans()))
def test_stride_0_inputs_anywhere_give_numpys_values(shape, cut):
    """Inputs broadcast by stride 0 along any axes (np.broadcast_to), beside a contiguous operand:
    within 4 float32 rounding errors of the operands' magnitudes (float64 oracle)."""
    rng = np.random.default_rng(sum(shape))
    small = tuple(1 if c else n for c, n in zip(cut, shape))
    x = np.broadcast_to(rng.standard_normal(small).astype(np.float32), shape)
    y = rng.standard_normal(shape).astype(np.float32)
    got = lt.evaluate(lt.tanh(lt.asarray(x)) * lt.asarray(y) + lt.asarray(x)).numpy()
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    bound = 4 * np.finfo(np.float32).eps * (np.abs(np.tanh(x64) * y64) + np.abs(x64))
    assert (np.abs(got - (np.tanh(x64) * y64 + x64)) <= bound).all()


@pytest.mark.slow
def test_every_float32_pattern_within_the_bounds():
    """The whole float32 range, 2^24 patterns at a time (minutes): the bounds of the dense sample."""
    step = 1 << 24
    for start in range(0, 1 << 32, step):
        x = np.arange(start, start + step, dtype=np.uint64).astype(np.uint32).view(np.float32)
        t = lt.asarray(x)
        results = lt.evaluate(*(getattr(lt, name)(t) for name in NAMES))
        for name, ulps, got in zip(NAMES, ULPS, results):
            with np.errstate(all="ignore"):
                want = EXACT[name](x.astype(np.float64)).astype(np.float32)
            keep = ~((np.abs(want) < np.finfo(np.float32).tiny) & (name == "sigmoid"))
            check_close(got.numpy()[keep], want[keep], ulps)


def _tanh_scan():
    """A parallel numba loop over float32 bit patterns start, start + step, ... < stop, each with both
    signs, calling the kernels' lt_tanh_f32 (its source as written into kernel modules): returns the
    largest ulp distance to float64 tanh rounded to float32 and the count of NaNs not returned bit
    for bit. Compiled, it checks all 2^32 patterns in minutes, where lt.evaluate and NumPy's float64
    reference take tens."""
    import numba
    namespace = {}
    exec("\n".join(["import math", "import numpy as np", "from numba import njit"]
                   + definitions_for("lt_tanh_f32(x)")), namespace)
    tanh = namespace["lt_tanh_f32"]

    @numba.njit(inline="always")
    def ordered(bits):
        return np.int64(bits) if bits >= 0 else -1 - (np.int64(bits) & 0x7FFFFFFF)

    @numba.njit(parallel=True)
    def scan(start, stop, step, chunks):
        worst = np.zeros(chunks, np.int64)
        bad = np.zeros(chunks, np.int64)
        count = (stop - start + step - 1) // step
        for c in numba.prange(chunks):
            for n in range(c * count // chunks, (c + 1) * count // chunks):
                for sign in (0, 1):
                    bits = np.uint32(start + n * step) | np.uint32(sign << 31)
                    x = np.uint32(bits).view(np.float32)
                    got = np.float32(tanh(x)).view(np.int32)
                    if x != x:
                        bad[c] += got != np.uint32(bits).view(np.int32)
                        continue
                    want = np.float32(math.tanh(np.float64(x))).view(np.int32)
                    worst[c] = max(worst[c], abs(ordered(got) - ordered(want)))
        return worst.max(), bad.sum()
    return scan


def test_tanh_on_a_stride_of_every_float32_pattern_within_an_ulp():
    """The fast sample of the exhaustive check below: every 4099th pattern (a prime stride: all
    mantissa residues), both signs."""
    worst, bad_nans = _tanh_scan()(0, 1 << 31, 4099, 64)
    assert worst <= 1 and bad_nans == 0, (worst, bad_nans)


@pytest.mark.slow
def test_tanh_on_every_float32_pattern_within_an_ulp():
    """All 2^32 patterns (a few minutes on two cores): tanh within 1 ulp of the rounded float64
    value, NaNs returned bit for bit (signalling ones too)."""
    worst, bad_nans = _tanh_scan()(0, 1 << 31, 1, 256)
    assert worst <= 1 and bad_nans == 0, (worst, bad_nans)
