"""The Array API 2025.12 revision's additions and changes, against NumPy: isin (scalars on either
side, invert), broadcast_shapes, broadcast_arrays/meshgrid/devices() as tuples, expand_dims with a
tuple of axes, permute_dims with negative axes, searchsorted with a scalar."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt
from lazytensor import array_api as xp


@settings(max_examples=15, deadline=None)
@given(hnp.arrays(np.int32, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
                  elements=st.integers(-3, 3)),
       hnp.arrays(np.int32, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3),
                  elements=st.integers(-3, 3)),
       st.booleans())
def test_isin_matches_numpy(x1, x2, invert):
    got = xp.isin(xp.asarray(x1), xp.asarray(x2), invert=invert)
    assert got.dtype == np.bool_ and got.shape == x1.shape
    np.testing.assert_array_equal(got.numpy(), np.isin(x1, x2, invert=invert))


def test_isin_takes_a_scalar_on_either_side():
    x = xp.asarray(np.array([1, 2, 3]))
    np.testing.assert_array_equal(xp.isin(x, 2).numpy(), [False, True, False])
    got = xp.isin(3, x)
    assert got.shape == () and bool(got) is True and not bool(xp.isin(7, x))
    with pytest.raises(TypeError, match="at least one"):
        xp.isin(1, 2)


def test_broadcast_shapes():
    assert xp.broadcast_shapes() == ()
    assert xp.broadcast_shapes((2, 1), (3,), (1, 1, 1)) == (1, 2, 3)
    assert all(type(d) is int for d in xp.broadcast_shapes((2, 1), (np.int64(4),)))
    with pytest.raises(ValueError):
        xp.broadcast_shapes((2,), (3,))


def test_tuples_expand_dims_permute_dims_searchsorted():
    a = np.arange(6.0).reshape(2, 3)
    t = xp.asarray(a)
    assert isinstance(xp.broadcast_arrays(t, t), tuple) and isinstance(xp.meshgrid(t[0], t[1]), tuple)
    assert isinstance(xp.__array_namespace_info__().devices(), tuple)
    assert xp.expand_dims(t, axis=(0, -1)).shape == np.expand_dims(a, (0, -1)).shape
    np.testing.assert_array_equal(xp.permute_dims(t, (-1, -2)).numpy(), a.T)
    s = xp.asarray(np.array([1.0, 2.0, 4.0]))
    assert int(xp.searchsorted(s, 3.0)) == 2 and xp.searchsorted(s, 3.0).shape == ()


def test_version():
    assert xp.__array_api_version__ == "2025.12"
    assert lt.asarray(np.zeros(1)).__array_namespace__(api_version="2025.12") is xp
