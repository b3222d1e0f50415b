"""memory.address reads a NumPy array's data pointer itself (lazytensor/core/_address.c), where
NumPy's `a.ctypes.data` builds a helper object per call: the same address for every kind of array
(views, negative and zero strides, empty, 0-d, read-only, bfloat16, subclasses)."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lazytensor.core import memory

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint64, np.bool_, np.complex64, ml_dtypes.bfloat16]


def test_the_compiled_reader_is_built():
    assert memory._array_address is not None, "lazytensor.core._address is not compiled (setup.py)"


@settings(max_examples=200, deadline=None)
@given(dtype=st.sampled_from(DTYPES), shape=st.lists(st.integers(0, 5), min_size=0, max_size=3),
       step=st.integers(-3, 3).filter(bool), start=st.integers(0, 2), broadcast=st.booleans())
def test_the_address_is_numpys(dtype, shape, step, start, broadcast):
    base = np.zeros(tuple(shape) + (6,), dtype)
    views = [base, base[..., start::step], base[..., start:start], base.T, base[..., 0]]
    if broadcast and base.size:
        views.append(np.broadcast_to(base[..., :1], tuple(shape) + (4,)))
    for a in views:
        assert memory.address(a) == a.ctypes.data


def test_other_arrays_of_numpy():
    a = np.arange(12.0)
    ro = a[2:]
    ro.flags.writeable = False
    for x in (ro, np.frombuffer(b"abcdefgh", np.uint8)[3:], np.asarray(3.5), a.view(np.matrix)):
        assert memory.address(x) == x.ctypes.data


def test_what_is_not_a_numpy_array_is_refused():
    if memory._array_address is None:
        pytest.skip("not compiled")
    with pytest.raises(TypeError, match="NumPy array"):
        memory._array_address([1.0])
