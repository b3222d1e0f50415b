"""np.unique, np.bincount, np.argwhere, np.histogram and np.isin. The first four have result
shapes that come from the data: the operands are evaluated and the device's array library (NumPy
on the CPU, CuPy on CUDA) computes them into new tensors (on CUDA, a host sync for the sizes).
isin keeps x's shape: against a few test values it is lazy (one fused reduction of x == each
value), against many it is evaluated and sorted by the library."""
from __future__ import annotations

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import apply
from lazytensor.core.operand import Operand
from lazytensor.core.tensor import Tensor
from lazytensor.ops import reductions as _red
from lazytensor.ops.device_arrays import array_module, evaluated
from lazytensor.ops.operands import operand
from lazytensor.ops.views import ravel, reshape

# Up to this many test values, isin compares each element with each of them in one fused kernel.
LAZY_ISIN_VALUES = 64


def _data(x, device, xp):
    if isinstance(x, Operand):
        t = evaluated(x)
        if t.device != device:
            raise ValueError(f"an operand on {t.device!r} with one on {device!r}: move one with "
                             f"lt.asarray(x, device=...)")
        return t.data
    return xp.asarray(np.asarray(x)) if xp is not np else np.asarray(x)


def _tensors(result, device):
    if isinstance(result, tuple):
        return tuple(Tensor(r, device) for r in result)
    return Tensor(result, device)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
           sorted=True):  # noqa: A002  (NumPy's name)
    """np.unique: the sorted distinct values (of the flattened operand, or the distinct slices along
    `axis`), with the indices, inverse and counts asked for. Evaluated now (new Tensors): the result
    size depends on the values."""
    t = evaluated(ar)
    xp = array_module(t.device)
    options = {} if equal_nan else {"equal_nan": False}
    if not sorted:
        options["sorted"] = False
    result = xp.unique(t.data, return_index, return_inverse, return_counts, axis, **options)
    return _tensors(tuple(result) if isinstance(result, (tuple, list)) else result, t.device)


def bincount(x, weights=None, minlength=0) -> Tensor:
    """np.bincount: how often each value 0, 1, ... occurs in the 1-D non-negative integers x (or the
    sum of their weights). Evaluated now (a new Tensor): its length is x's maximum plus one."""
    t = evaluated(x)
    xp = array_module(t.device)
    w = None if weights is None else _data(weights, t.device, xp)
    return Tensor(xp.bincount(t.data, w, minlength), t.device)


def argwhere(a) -> Tensor:
    """np.argwhere: the indices of the nonzero elements, one row each (int64). Evaluated now."""
    t = evaluated(a)
    xp = array_module(t.device)
    return Tensor(xp.argwhere(t.data).astype(np.int64, copy=False), t.device)


def histogram(a, bins=10, range=None, density=None, weights=None) -> tuple:  # noqa: A002  (NumPy's name)
    """np.histogram: (counts, bin_edges) as tensors. Evaluated now: the edges come from the values
    unless bins and range give them."""
    t = evaluated(a)
    xp = array_module(t.device)
    if isinstance(bins, Operand) or isinstance(bins, (list, tuple, np.ndarray)):
        bins = _data(bins, t.device, xp)
    w = None if weights is None else _data(weights, t.device, xp)
    hist, edges = xp.histogram(t.data, bins=bins, range=range, density=density, weights=w)
    return Tensor(hist, t.device), Tensor(edges, t.device)


def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """np.isin: for each element of `element`, whether it equals one of test_elements (NaN equals
    nothing); a bool of element's shape. Lazy against up to LAZY_ISIN_VALUES test values."""
    x = operand(element)
    if kind not in (None, "sort", "table"):
        raise ValueError(f"Invalid kind: '{kind}'. Please use None, 'sort' or 'table'.")
    size = test_elements.size if hasattr(test_elements, "size") else np.size(test_elements)
    if size <= LAZY_ISIN_VALUES and kind is None:
        test = test_elements if isinstance(test_elements, Operand) else _tensor.asarray(
            np.asarray(test_elements), device=x.device)
        if size == 0:
            found = apply("not_equal", _tensor.zeros(x.shape, bool, x.device), False)
        else:
            pairs = apply("equal", reshape(x, tuple(x.shape) + (1,)), ravel(test))
            found = _red.reduce("any", pairs, -1)
        return apply("logical_not", found) if invert else found
    t = evaluated(x)
    xp = array_module(t.device)
    options = {} if kind is None or xp is not np else {"kind": kind}
    return Tensor(xp.isin(t.data, _data(test_elements, t.device, xp), assume_unique=assume_unique, invert=invert,
                          **options), t.device)
