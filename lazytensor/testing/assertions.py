"""NumPy's assertions for lazytensor values: tensors and expressions are evaluated first (on their
own device, then copied to the host), then NumPy's np.testing compares and words the message."""
from __future__ import annotations

import numpy as np

from lazytensor.core.operand import Operand
from lazytensor.core.tensor import Tensor, asarray
from lazytensor.assign.evaluate import to_numpy
from lazytensor.core.dtypes import BFLOAT16, is_float

# The relative tolerance of assert_same_as_numpy per float dtype: room for a few roundings that
# differ (transcendental functions within a few ULP, sums added in another order), far below any
# wrong formula.
RTOL = {np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12,
        BFLOAT16: 8e-3}     # a rounding of bfloat16 (2^-8) and a little


def _host(x):
    """A lazytensor value as a NumPy array (evaluated if it is an expression); anything else as it is."""
    return to_numpy(x) if isinstance(x, Operand) else x


def assert_allclose(actual, desired, rtol=1e-07, atol=0, equal_nan=True, err_msg="", verbose=True, *,
                    strict=False):
    """np.testing.assert_allclose, with lazytensor tensors and expressions on either side."""
    np.testing.assert_allclose(_host(actual), _host(desired), rtol=rtol, atol=atol, equal_nan=equal_nan,
                               err_msg=err_msg, verbose=verbose, strict=strict)


def assert_array_equal(actual, desired, err_msg="", verbose=True, *, strict=False):
    """np.testing.assert_array_equal, with lazytensor tensors and expressions on either side."""
    np.testing.assert_array_equal(_host(actual), _host(desired), err_msg=err_msg, verbose=verbose, strict=strict)


def assert_same_as_numpy(fn, *arrays, rtol=None, atol=0, device=None, err_msg=""):
    """Run `fn` once on lazytensor tensors and once on NumPy arrays holding the same values, and
    check that it returns the same: results of the same dtype and shape, with equal values (exactly
    for integers and bools; for floats NaN in the same places and within `rtol` (by default
    RTOL[dtype]) and `atol`). `arrays` are NumPy arrays, tensors, or scalars (passed to both as
    they are); `fn` may return one value or a tuple / list of them. Returns NumPy's result."""
    np_args = [to_numpy(a) if isinstance(a, Tensor) else a for a in arrays]
    lt_args = [asarray(a, device=device) if isinstance(a, np.ndarray) else a for a in np_args]
    if device is not None:
        lt_args = [asarray(a, device=device) if isinstance(a, Tensor) else a for a in lt_args]
    expected = fn(*np_args)
    got = fn(*lt_args)
    many = isinstance(expected, (tuple, list))
    if many != isinstance(got, (tuple, list)) or (many and len(expected) != len(got)):
        raise AssertionError(f"{err_msg}\n{_name(fn)} returned {_count(got)} on lazytensor tensors and "
                             f"{_count(expected)} on NumPy arrays".strip())
    for i, (g, e) in enumerate(zip(got, expected) if many else [(got, expected)]):
        _compare(_host(g), e, rtol, atol, f"{err_msg} {_name(fn)}" + (f", result {i}" if many else ""))
    return expected


def _compare(got, expected, rtol, atol, what):
    got, expected = np.asarray(got), np.asarray(expected)
    if got.dtype != expected.dtype:
        raise AssertionError(f"{what}: dtype {got.dtype} on lazytensor tensors, {expected.dtype} on NumPy arrays")
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {got.shape} on lazytensor tensors, {expected.shape} on NumPy arrays")
    if (expected.dtype.kind == "c" or is_float(expected.dtype)):
        tol = RTOL.get(expected.dtype, 1e-12) if rtol is None else rtol
        np.testing.assert_allclose(got, expected, rtol=tol, atol=atol, equal_nan=True,
                                   err_msg=f"{what}: lazytensor (actual) vs NumPy (desired)", strict=True)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=f"{what}: lazytensor (actual) vs NumPy (desired)",
                                      strict=True)


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _count(result) -> str:
    return f"{len(result)} values" if isinstance(result, (tuple, list)) else "one value"
