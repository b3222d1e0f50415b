"""The vectorizing float32 helpers of the generated numba kernels (kernels/numba_vector_math.py):
accuracy on a dense sample of every float32 bit pattern, NumPy's special values, that the kernels
calling them vectorize, and that only kernels using a helper carry it."""
import platform

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.kernels.backend import backend_for
from lazytensor.kernels.numba_vector_math import definitions_for

EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1.1754942e-38, 3e-4, 0.55, -0.55,
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
    worst = int(d.argmax())
    assert d.max() <= max_ulps, (f"{d.max()} ulps at x = {float(np.asarray(got)[~nan][worst])!r}: "
                                 f"got {got[~nan][worst]!r}, want {want[~nan][worst]!r}")
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan])), "a sign differs (signed zeros)"


def test_tanh_float32_within_1_ulp_of_the_rounded_float64_value_and_2_of_numpy():
    x = float32_sample()
    got = lt.evaluate(lt.tanh(lt.asarray(x))).numpy()
    with np.errstate(invalid="ignore"):
        exact = np.tanh(x.astype(np.float64)).astype(np.float32)
    check_close(got, exact, 1)
    check_close(got, np.tanh(x), 2)
    nan_in = np.isnan(x)
    assert np.array_equal(got[nan_in].view(np.uint32), x[nan_in].view(np.uint32)), "a NaN comes back as it came"


def test_tanh_float16_within_1_ulp_of_numpy_on_every_pattern():
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got = lt.evaluate(lt.tanh(lt.asarray(x))).numpy()
    assert got.dtype == np.float16
    nan = np.isnan(x)
    with np.errstate(invalid="ignore"):
        want = np.tanh(x)
    assert np.isnan(got[nan]).all()
    d = np.abs(got[~nan].astype(np.float64) - want[~nan].astype(np.float64))
    assert (d <= np.spacing(np.abs(want[~nan]))).all()
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=300),
       st.sampled_from([np.float32, np.float64]))
def test_tanh_in_a_fused_kernel_matches_numpy(values, dtype):
    x = np.array(values, dtype)
    y = np.linspace(-3, 3, x.size).astype(dtype)
    got = lt.evaluate(lt.tanh(lt.asarray(x) * 0.5 + lt.asarray(y)) * 2).numpy()
    with np.errstate(all="ignore"):
        want = np.tanh(x * dtype(0.5) + y) * dtype(2)
    assert got.dtype == want.dtype
    np.testing.assert_array_max_ulp(got, want, maxulp=3)


def test_only_kernels_calling_a_helper_carry_its_definition():
    a32 = lt.asarray(np.linspace(-2, 2, 64, dtype=np.float32))
    a64 = lt.asarray(np.linspace(-2, 2, 64))
    src32 = str(lt.explain(lt.tanh(a32) + 1))
    assert "def lt_tanh_f32(x):" in src32 and "def lt_exp_neg_f32(y):" in src32
    assert src32.index("def lt_exp_neg_f32") < src32.index("def lt_tanh_f32") < src32.index("def kernel_par")
    src64 = str(lt.explain(lt.tanh(a64) + 1))
    assert "np.tanh(" in src64 and "lt_tanh_f32" not in src64
    assert "def lt_" not in str(lt.explain(a32 * 2 + 1))     # other kernels keep their text (and names)
    assert definitions_for("v1 = np.exp(v0)") == []


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86 assembly")
def test_the_kernel_loop_vectorizes_and_calls_no_libm_tanh():
    n = 1 << 17
    a, b = (lt.asarray(np.linspace(-4, 4, n, dtype=np.float32) + i) for i in range(2))
    out = lt.empty((n,), np.float32)
    out[...] = lt.tanh(a * b) * b
    kernels = [k for k in backend_for("cpu").kernels._kernels.values()
               if "lt_tanh_f32(v" in k.source and k.module.kernel_par.signatures]
    cached = kernels[-1].module.kernel_par
    # numba shows no assembly of a kernel loaded from its disk cache: compile the same text afresh
    module = {}
    exec(compile(kernels[-1].source.replace("cache=True", "cache=False"), "<kernel>", "exec"), module)
    fn = module["kernel_par"]
    fn.compile(cached.signatures[0])
    asm = fn.inspect_asm(fn.signatures[0])
    assert "tanhf" not in asm
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
