"""The interpreter tier (kernels/cpu/interpret.py): a first call runs with NumPy's ufuncs while its
kernel compiles in the background, and gives what the kernel gives.

Both tiers pass the same random-DAG oracle (lazytensor.testing: exact for integers, bools and exactly
rounded float ops, within the propagated bound for transcendental functions), and where a value
is exact the two tiers agree bit for bit.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import lazytensor as lt
from lazytensor.kernels.backend import backend_for
from lazytensor.kernels.cache import KernelCache

from lazytensor.testing import assert_matches, dags

EXAMPLES = int(os.environ.get("LT_PROPERTY_EXAMPLES", "70"))
PROFILE = settings(max_examples=EXAMPLES, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                          HealthCheck.function_scoped_fixture])  # the fixture holds for every example


@pytest.fixture
def interpreter_only(monkeypatch):
    """Every elementwise call on the CPU runs through the interpreter: no kernel is cached and
    none is compiled in the background."""
    backend = backend_for("cpu")
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    monkeypatch.setattr(backend, "kernels", KernelCache())
    monkeypatch.setattr(backend.compiler, "submit", lambda key, job: None)
    return backend


@PROFILE
@given(dag=dags())
def test_interpreter_matches_numpy(interpreter_only, dag):
    got = lt.evaluate(dag.expr)
    assert_matches(got.numpy(), dag.expected, dag.err, repr(dag))


@PROFILE
@given(dag=dags(max_ops=5))
def test_interpreter_into_a_strided_destination(interpreter_only, dag):
    shape = dag.expected.shape
    buf = np.full(shape[:-1] + (2 * shape[-1] + 1,), 7, dag.dtype) if shape else np.full((), 7, dag.dtype)
    view = buf[..., 1::2] if shape else buf
    before = buf.copy()
    y = lt.asarray(view)
    y[...] = dag.expr
    assert_matches(view, dag.expected, dag.err, repr(dag))
    if shape:
        np.testing.assert_array_equal(buf[..., ::2], before[..., ::2])


@pytest.mark.compiled_tier
def test_first_call_is_interpreted_and_the_compiled_kernel_takes_over(monkeypatch, tmp_path):
    """In a fresh process (nothing compiled, an empty cache folder): the first call is served by the
    interpreter, the kernel compiles in the background, later calls launch it, and the values of
    both tiers are the same bits for these exact ops."""
    code = textwrap.dedent("""
        import numpy as np, lazytensor as lt
        from lazytensor.kernels.backend import backend_for
        rng = np.random.default_rng(0)
        a = lt.asarray(rng.standard_normal(1000).astype(np.float32))
        b = lt.asarray(rng.integers(-5, 5, 1000).astype(np.int16))
        y = lt.empty((1000,), np.float32)
        with lt.profile() as first:
            y[...] = lt.relu((a + b) * 2.5 - a // 3)
        v1 = y.numpy().copy()
        assert backend_for("cpu").compiler.drain(120)
        with lt.profile() as later:
            y[...] = lt.relu((a + b) * 2.5 - a // 3)
        assert first.kernels[0].name == "interpreter", first
        assert later.kernels[0].name.startswith("lt_"), later
        assert np.array_equal(v1.view(np.uint32), y.numpy().view(np.uint32))
        print("ok")
    """)
    env = dict(os.environ, LAZYTENSOR_JIT_WAIT="0", LAZYTENSOR_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


@pytest.mark.compiled_tier
def test_wait_switch_compiles_in_the_foreground(monkeypatch):
    backend = backend_for("cpu")
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "1")
    monkeypatch.setattr(backend, "kernels", KernelCache())
    submitted = []
    monkeypatch.setattr(backend.compiler, "submit", lambda key, job: submitted.append(key))
    a = lt.asarray(np.arange(5, dtype=np.int32))
    with lt.profile() as p:
        lt.evaluate(a * 3 + 1)
    assert not submitted and p.kernels[0].name.startswith("lt_")


def test_integer_powers_with_negative_exponents_as_the_kernels_define_them(interpreter_only):
    base = lt.asarray(np.array([1, -1, -1, 2, -3, 0, 5], np.int32))
    exp = lt.asarray(np.array([-3, -2, -3, -1, 2, 3, -1], np.int32))
    np.testing.assert_array_equal(lt.evaluate(base ** exp).numpy(), [1, 1, -1, 0, 9, 0, 0])


@pytest.mark.parametrize("dtype, bits", [(np.float16, np.uint16), (np.float32, np.uint32), (np.float64, np.uint64)])
def test_relu_bit_for_bit_as_the_kernel(dtype, bits):
    """relu: +0.0 for -0.0 and negatives, each NaN kept with its sign and payload (quiet and
    signalling), as the compiled kernel gives, at lengths that take NumPy's vector loops and their
    tails; and in the branch-free passes whatever the order of signs."""
    from lazytensor.kernels.cpu.interpret import _relu
    rng = np.random.default_rng(5)
    patterns = rng.integers(0, np.iinfo(bits).max, size=4099, dtype=bits).view(dtype)
    special = np.array([-0.0, 0.0, -1.0, 2.0, np.inf, -np.inf, np.nan, -np.nan], dtype)
    nan_bits = np.array([np.iinfo(bits).max, (np.iinfo(bits).max >> 1) + 1 + 1], bits).view(dtype)  # -qNaN(all), -sNaN
    x = np.concatenate([special, nan_bits, patterns])
    t = lt.asarray(x, device="cpu")
    kernel = lt.evaluate(lt.relu(t)).numpy()            # (the suite waits for the compiled kernel)
    # (float16 NaNs: the kernel computes in float32 and its vector loop gives the canonical NaN,
    # its scalar loop the payload, so only where NaNs are is compared)
    nan = np.isnan(x) if dtype == np.float16 else np.zeros(len(x), bool)
    with np.errstate(all="ignore"):
        for part in [slice(None, n) for n in (1, 7, 9, 31, len(x))] + [slice(-n, None) for n in (1, 7, 9, 31)]:
            got, want = _relu(x[part]), kernel[part]
            assert np.array_equal(np.isnan(got), np.isnan(want)), part
            keep = ~nan[part]
            assert np.array_equal(got[keep].view(bits), want[keep].view(bits)), part


def test_relu_mask_from_the_interpreter(interpreter_only):
    from lazytensor.kernels.cpu.interpret import run_program
    from lazytensor.kernels.program import program_for
    x = np.array([1.0, -2.0, 0.0, -0.0, np.nan, 3.0, 4.0, -1.0, 2.0], np.float32)
    program = program_for((("load", np.dtype(np.float32), 0), ("relu", np.dtype(np.float32), 0)), 1, (),
                          np.float32, relu_mask=True)
    out = np.empty_like(x)
    mask = np.empty(2, np.uint8)
    run_program(program, out, [x], [], mask)
    np.testing.assert_array_equal(mask, np.packbits(x > 0, bitorder="little"))
    assert not np.signbit(out[3]) and np.isnan(out[4])


REDUCTIONS = ["sum", "prod", "mean", "max", "min", "any", "all", "argmax", "argmin", "var", "std"]


@pytest.mark.parametrize("kind", REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.int16, np.uint8, np.float32, np.float64, np.bool_])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2)])
def test_interpreted_reductions_match_numpy(interpreter_only, kind, dtype, axis):
    if kind in ("argmax", "argmin") and isinstance(axis, tuple):
        pytest.skip("NumPy's arg-reductions take one axis")
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((5, 4, 3)) * 4).astype(dtype)
    if dtype == np.float32:
        x[1, 2, 0] = np.nan
    t = lt.asarray(x)
    got = lt.evaluate(getattr(lt, kind)(t + t, axis=axis)).numpy()
    want = getattr(np, kind)(x + x, axis=axis)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.compiled_tier
def test_reduction_first_call_is_interpreted_then_compiled(tmp_path):
    code = textwrap.dedent("""
        import numpy as np, lazytensor as lt
        from lazytensor.kernels.backend import backend_for
        x = lt.asarray(np.arange(3000, dtype=np.int32).reshape(30, 100))
        with lt.profile() as first:
            s1 = lt.evaluate((x * 3 - 7).sum(axis=1)).numpy()
        assert backend_for("cpu").compiler.drain(120)
        with lt.profile() as later:
            s2 = lt.evaluate((x * 3 - 7).sum(axis=1)).numpy()
        assert first.kernels[0].name == "interpreter", first
        assert later.kernels[0].name.startswith("lt_"), later
        assert np.array_equal(s1, s2) and np.array_equal(s1, (np.arange(3000).reshape(30, 100) * 3 - 7).sum(1))
        print("ok")
    """)
    env = dict(os.environ, LAZYTENSOR_JIT_WAIT="0", LAZYTENSOR_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_several_outputs_from_the_interpreter(interpreter_only):
    rng = np.random.default_rng(5)
    an, bn = rng.standard_normal(300).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    a, b = lt.asarray(an.copy()), lt.asarray(bn.copy())
    s, d, m = lt.evaluate(a + b, a - b, lt.maximum(a, b) * 2)
    np.testing.assert_array_equal(s.numpy(), an + bn)
    np.testing.assert_array_equal(d.numpy(), an - bn)
    np.testing.assert_array_equal(m.numpy(), np.maximum(an, bn) * 2)


def test_importing_lazytensor_imports_neither_numba_nor_cupy():
    code = "import sys, lazytensor; print(sorted(m for m in ('numba', 'cupy') if m in sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stdout + run.stderr


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("value", [-1.5, -0.0, 0.0, 2.5, np.inf, -np.inf, np.nan])
def test_interpreter_relu_of_a_0d_value(interpreter_only, dtype, value):
    x = np.array(value, dtype)
    got = lt.evaluate(lt.relu(lt.asarray(x))).numpy()
    want = x if x != x else np.array(np.maximum(x, 0) + dtype(0), dtype)
    assert got.shape == () and got.dtype == dtype
    assert got.tobytes() == want.tobytes() or (np.isnan(got) and np.isnan(want))


def test_a_call_the_interpreter_cannot_serve_still_submits_its_compile(monkeypatch):
    backend = backend_for("cpu")
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    monkeypatch.delenv("LAZYTENSOR_TIER", raising=False)    # (a forced tier submits nothing)
    monkeypatch.setattr(backend, "kernels", KernelCache())
    submitted = []
    monkeypatch.setattr(backend.compiler, "submit", lambda key, job: submitted.append(key))

    def refuse(*args, **kwargs):
        raise RuntimeError("the interpreter cannot serve this call")
    monkeypatch.setattr("lazytensor.kernels.cpu.backend.run_program", refuse)
    with pytest.raises(RuntimeError, match="cannot serve"):
        lt.evaluate(lt.exp(lt.asarray(np.ones(3, np.float32))))
    assert len(submitted) == 1


def test_a_reduction_the_interpreter_cannot_serve_still_submits_its_compile(monkeypatch):
    backend = backend_for("cpu")
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    monkeypatch.delenv("LAZYTENSOR_TIER", raising=False)    # (a forced tier submits nothing)
    monkeypatch.setattr(backend, "kernels", KernelCache())
    submitted = []
    monkeypatch.setattr(backend.compiler, "submit", lambda key, job: submitted.append(key))

    def refuse(*args, **kwargs):
        raise RuntimeError("the interpreter cannot serve this call")
    monkeypatch.setattr("lazytensor.kernels.cpu.backend.interpret_reduction", refuse)
    with pytest.raises(RuntimeError, match="cannot serve"):
        lt.evaluate(lt.sum(lt.exp(lt.asarray(np.ones(3, np.float32)))))
    assert len(submitted) == 1
