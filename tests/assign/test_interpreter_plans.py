"""The interpreter tier's kept plans (kernels/cpu/interpret_plan.py) give the bits of the first,
unplanned call: a program's later calls of the same structure run the plan's ufunc calls into kept
buffers, the stored value written straight into the destination."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import lazytensor as lt
from lazytensor.kernels.cpu import interpret, interpret_plan
from lazytensor.testing import dags
from tests.support.tiers import interpreter_tier

EXAMPLES = int(os.environ.get("LT_PROPERTY_EXAMPLES", "25"))


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.tobytes()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(dag=dags(max_ops=6))
def test_a_planned_call_gives_the_first_call_s_bits(dag):
    with interpreter_tier():
        first = lt.evaluate(dag.expr).numpy()
        assert all(_bits(lt.evaluate(dag.expr).numpy()) == _bits(first) for _ in range(2)), repr(dag)


def test_planned_calls_over_blocks_broadcasts_and_a_strided_destination():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((300, 700)).astype(np.float32)
    x[::7, ::3] = -0.0
    x[::11, 1::5] = np.nan
    v = rng.standard_normal(700).astype(np.float32)
    a, b = lt.asarray(x), lt.asarray(v)
    want = np.maximum((x + v) * 3 - v, 0)
    with interpreter_tier():
        interpret._plans = interpret.PlanCache()
        for _ in range(3):
            y = lt.asarray(np.zeros((300, 1400), np.float32))
            y[:, ::2] = lt.relu((a + b) * 3 - b)
            got = y.numpy()[:, ::2]
            assert got.tobytes() == np.ascontiguousarray(want).tobytes()
            assert not y.numpy()[:, 1::2].any()
        assert interpret._plans._free          # (the later calls ran kept plans)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (1031,), (interpret.BLOCK + 37,), (300, 301)])
def test_relu_steps_over_a_block_of_zeros_keep_the_kernels_relu(dtype, shape):
    """A relu step's maximum reads a block of zeros (NumPy's loop over a broadcast scalar is not
    vectorized): -0.0 and negatives give +0.0, NaNs keep their payloads bit for bit, in the kept
    plans (a strided destination) and the flat runners alike."""
    uint = np.dtype(f"u{np.dtype(dtype).itemsize}")
    nans = [0x7FA00001, 0xFFC12345, 0x7FC00000] if uint.itemsize == 4 else \
        [0x7FF4000000000001, 0xFFF8000000000123, 0x7FF8000000000000]
    x = np.resize(np.array(nans, uint).view(dtype), shape).copy()
    flat = x.reshape(-1)
    flat[1::4] = -0.0
    flat[2::5] = -1.5
    flat[3::7] = 2.5
    z = np.zeros(shape, dtype)
    s = x + z                                   # (NumPy's add, which quiets a signalling NaN)
    want = np.where((s > 0) | (s != s), s, dtype(0)).view(uint)
    assert isinstance(interpret_plan.relu_zero((5,), dtype), np.ndarray) == interpret_plan._RELU_BY_ZEROS[dtype]
    with interpreter_tier():
        a, b = lt.asarray(x), lt.asarray(z)
        for _ in range(3):
            y = lt.empty(shape, dtype)
            y[...] = lt.relu(a + b)
            assert np.array_equal(y.numpy().view(uint), want)
            wide = lt.asarray(np.zeros(shape[:-1] + (2 * shape[-1],), dtype))
            wide[..., ::2] = lt.relu(a + b)
            assert np.array_equal(wide.numpy()[..., ::2].view(uint), want)


def test_a_view_of_a_kept_buffer_is_not_overwritten_by_a_later_value():
    """np.real and np.imag of a complex block are views of its buffer: the buffer serves no later
    value while the view is live (real(x * 1j) + real(x * 2) read 2x twice before)."""
    z = np.array([0.3 - 0.7j, -1.25 + 2j, 4j])
    x = lt.asarray(z)
    with interpreter_tier():
        interpret._plans = interpret.PlanCache()
        for _ in range(3):
            np.testing.assert_array_equal(np.asarray(lt.real(x * 1j) + lt.real(x * 2)), (z * 1j).real + (z * 2).real)
            np.testing.assert_array_equal(np.asarray(lt.imag(x * 3) * lt.imag(x + 1j)), (z * 3).imag * (z + 1j).imag)
        assert interpret._plans._free
