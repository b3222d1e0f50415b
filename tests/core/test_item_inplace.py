"""`t[i] += v` (and -=, *=) with a Python scalar on a CPU tensor nothing reads is NumPy's statement:
arithmetic on the item as a NumPy scalar, written back. The same values, dtypes and warnings
(integer overflow wraps and warns, as NumPy's scalar arithmetic does), and the same OverflowError
for a Python int beyond the dtype."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt

DTYPES = [np.int8, np.uint8, np.int16, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64]
OPS = ["add", "subtract", "multiply"]


def _inplace(x, op, i, v):
    if op == "add":
        x[i] += v
    elif op == "subtract":
        x[i] -= v
    else:
        x[i] *= v


def _outcome(f):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            f()
            error = None
        except (OverflowError, TypeError) as e:
            error = type(e)
    return error, sorted({(w.category.__name__, str(w.message)) for w in seen})


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(DTYPES), op=st.sampled_from(OPS), i=st.integers(-5, 4), data=st.data())
def test_item_inplace_is_numpys(dtype, op, i, data):
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else np.finfo(dtype)
    start = data.draw(st.integers(int(info.min), int(info.max)) if np.dtype(dtype).kind in "iu"
                      else st.floats(float(info.min), float(info.max), width=np.dtype(dtype).itemsize * 8))
    value = data.draw(st.integers(-2 ** 65, 2 ** 65) if np.dtype(dtype).kind in "iu"
                      else st.one_of(st.integers(-1000, 1000), st.floats(allow_nan=True, allow_infinity=True)))
    a = np.full(5, start, dtype)
    t = lt.asarray(a.copy(), device="cpu")
    want = _outcome(lambda: _inplace(a, op, i, value))
    got = _outcome(lambda: _inplace(t, op, i, value))
    assert got == want
    np.testing.assert_array_equal(t.numpy(), a)
    assert t.dtype == a.dtype


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
def test_integer_overflow_wraps_and_warns_as_numpy(dtype):
    a = np.full(3, np.iinfo(dtype).max, dtype)
    t = lt.asarray(a.copy(), device="cpu")
    assert _outcome(lambda: _inplace(t, "add", 1, 1)) == _outcome(lambda: _inplace(a, "add", 1, 1))
    np.testing.assert_array_equal(t.numpy(), a)
