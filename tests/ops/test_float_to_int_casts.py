"""A float cast to an integer dtype gives NumPy's integers, negative values into unsigned dtypes
included (-1.0 is 255 as uint8, as NumPy's C casts give on x86), at every length: the compiled loop's
vector body and its scalar tail, and the interpreter tier, agree with NumPy."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt

SOURCES = [np.float16, np.float32, np.float64, np.complex64, np.complex128]
TARGETS = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64]


@pytest.mark.parametrize("src", SOURCES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dst", TARGETS, ids=lambda d: np.dtype(d).name)
@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.floats(-100, 100, width=16), min_size=0, max_size=70))
def test_float_to_int_casts_are_numpys(src, dst, values):
    a = np.array(values, np.float64).astype(src)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # (ComplexWarning: NumPy's cast drops the imaginary part)
        want = a.astype(dst)
        got = np.asarray(lt.asarray(a, device="cpu").astype(dst))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 64, 67])
def test_negative_values_into_unsigned_at_every_length(n):
    a = -np.arange(1, n + 1, dtype=np.float32) * 3
    for dst in (np.uint8, np.uint16, np.uint32, np.uint64):
        np.testing.assert_array_equal(np.asarray(lt.asarray(a, device="cpu").astype(dst)), a.astype(dst))
