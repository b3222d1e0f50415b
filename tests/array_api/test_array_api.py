"""x.__array_namespace__() (lazytensor.array_api) against NumPy, where the standard and NumPy
agree, and against the standard's own definition where they differ (var/std `correction`, stable
descending sort, astype's copy)."""
from __future__ import annotations

import numpy as np
import pytest

import lazytensor as lt


def _xp():
    return lt.asarray(np.zeros(1)).__array_namespace__()


def test_namespace_and_version():
    xp = _xp()
    assert xp is lt.array_api and xp.__array_api_version__ == "2025.12"
    assert lt.asarray(np.zeros(1)).__array_namespace__(api_version="2023.12") is xp
    assert lt.asarray(np.zeros(1)).__array_namespace__(api_version="2024.12") is xp
    with pytest.raises(ValueError, match="2025.12"):
        lt.asarray(np.zeros(1)).__array_namespace__(api_version="2099.01")


@pytest.mark.parametrize("name,numpy_name", [("acos", "arccos"), ("asin", "arcsin"), ("atan", "arctan"),
                                             ("acosh", "arccosh"), ("asinh", "arcsinh"), ("atanh", "arctanh"),
                                             ("atan2", "arctan2"), ("bitwise_left_shift", "left_shift"),
                                             ("bitwise_right_shift", "right_shift"), ("bitwise_invert", "invert"),
                                             ("pow", "power"), ("divide", "true_divide"), ("add", "add"),
                                             ("logaddexp", "logaddexp"), ("square", "square")])
def test_standard_names_build_the_same_lazy_nodes(name, numpy_name):
    xp = _xp()
    x = np.array([1, 2, 3], np.int32) if "bitwise" in name else np.array([0.25, 0.5, 0.75])
    args = (lt.asarray(x),) * getattr(np, numpy_name).nin
    got = getattr(xp, name)(*args)
    assert isinstance(got, lt.Expr)
    with np.errstate(all="ignore"):
        want = getattr(np, numpy_name)(*(x,) * len(args))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_where_the_standard_differs_from_numpy():
    xp = _xp()
    x = np.array([3.0, 1.0, 2.0, 2.0, 5.0])
    t = lt.asarray(x)
    np.testing.assert_allclose(xp.var(t, correction=1).numpy(), np.var(x, ddof=1))
    np.testing.assert_allclose(xp.std(t, correction=1).numpy(), np.std(x, ddof=1))
    np.testing.assert_array_equal(xp.sort(t, descending=True).numpy(), np.sort(x)[::-1])
    np.testing.assert_array_equal(xp.argsort(t, descending=True).numpy(), [4, 0, 2, 3, 1])   # stable: 2 before 3
    assert xp.astype(t, xp.float64, copy=False) is t
    c = xp.astype(t, xp.float64)
    assert isinstance(c, lt.Tensor) and c.data is not t.data
    np.testing.assert_array_equal(xp.concat([t, t]).numpy(), np.concatenate([x, x]))
    assert xp.permute_dims(lt.asarray(np.ones((2, 3))), (1, 0)).shape == (3, 2)
    assert xp.clip(t) is t
