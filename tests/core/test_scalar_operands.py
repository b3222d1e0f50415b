"""How 0-d and scalar-like operands reach a kernel, bit for bit (signed zeros, inf), pinned on the
CPU for both backends.

- A 0-d Tensor is an array input (`load`), its element read from memory as it is. On CUDA it got
  there from the host as bytes: cupy.asarray fills a 0-d array from its value, and CuPy's fill
  writes any value equal to 0 with a memset, so -0.0 arrived as +0.0 (kernels.cuda.from_host).
- A 0-d NumPy array used as an operand is a strong NumPy scalar, as NumPy treats it; NumPy
  scalars and Python scalars are kernel arguments (`scalar`), never source text.
- A weak Python float is cast to the op's dtype where the node is built, as NumPy casts it at the
  op: out of range it is inf, with NumPy's overflow warning there and nowhere else (the CUDA
  argument converters used to warn on every launch).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.kernels.cuda.backend import from_host
from lazytensor.kernels.cuda.kernel import scalar_converters
from lazytensor.plan.lower import lower

F16 = np.dtype(np.float16)


def _signbits(a):
    return np.signbit(np.asarray(a)).tolist()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_zero_d_tensor_is_a_load_of_its_own_bits(dtype):
    t = lt.asarray(np.array(-0.0, dtype), device="cpu")
    e = -t
    program, inputs, scalars = lower(e, e.dtype)
    assert [ins[0] for ins in program.instrs] == ["load", "negative"] and scalars == []
    assert inputs[0].shape == () and _signbits(inputs[0]) is True
    assert _signbits(e.numpy()) is False                      # NumPy: -(-0.0) is +0.0


@pytest.mark.parametrize("value", [np.array(-0.0, np.float16), np.float16(-0.0), -0.0])
def test_scalar_like_operands_are_arguments_with_their_sign(value):
    t = lt.asarray(np.ones(3, np.float16), device="cpu")
    e = t * value
    program, inputs, scalars = lower(e, e.dtype)
    assert [ins[0] for ins in program.instrs].count("scalar") == 1 and len(inputs) == 1
    assert program.scalar_dtypes == (F16,) and np.signbit(scalars[0])
    args = [convert(v) for convert, v in zip(scalar_converters(program), scalars)]
    assert args[0].dtype == np.float32 and np.signbit(args[0])   # float16 travels as float32
    np.testing.assert_array_equal(_signbits(e.numpy()), _signbits(np.ones(3, F16) * value))


def test_out_of_range_python_float_warns_where_built_as_numpy_does():
    t = lt.asarray(np.ones(3, np.float16), device="cpu")
    with pytest.warns(RuntimeWarning, match="overflow"):
        expected = np.ones(3, np.float16) + 70000.0
    with pytest.warns(RuntimeWarning, match="overflow"):
        e = t + 70000.0
    program, _, scalars = lower(e, e.dtype)
    assert scalars == [np.inf]
    with warnings.catch_warnings():
        warnings.simplefilter("error")                        # no warning when the argument is made
        assert [c(v) for c, v in zip(scalar_converters(program), scalars)] == [np.float32(np.inf)]
        got = e.numpy()
    np.testing.assert_array_equal(got, expected)


class _CupyFillingZeroD:
    """cupy.asarray as CuPy does it: a 0-d array is filled from its value, and a value equal to 0
    is written by a memset (all bits zero)."""

    @staticmethod
    def asarray(a):
        if a.ndim == 0:
            return np.zeros((), a.dtype) if a.item() == 0 else np.array(a.item(), a.dtype)
        return np.array(a, copy=True)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_host_arrays_reach_the_device_as_bytes(dtype):
    zero_d = from_host(_CupyFillingZeroD, np.array(-0.0, dtype))
    assert zero_d.shape == () and _signbits(zero_d) is True
    vector = from_host(_CupyFillingZeroD, np.array([-0.0, 1.5], dtype))
    assert _signbits(vector) == [True, False]
