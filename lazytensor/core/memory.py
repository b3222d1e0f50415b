"""Where an array's memory comes from: the questions aliasing and plan recipes ask of NumPy and
CuPy arrays alike.

owner(a): the object that owns a's allocation; every view of it has the same owner. For NumPy, the
end of the `.base` chain (not always an array: as_strided hangs its array on a wrapper object). For
CuPy, the allocation behind `a.data` (`MemoryPointer.mem`): a view made from a memory pointer
(`cupy.ndarray(..., memptr=...)`, as_strided) has no `.base`, but it shares that.
"""
from __future__ import annotations

import numpy as np


def owner(a):
    if isinstance(a, np.ndarray):
        while getattr(a, "base", None) is not None:
            a = a.base
        return a
    mem = getattr(a.data, "mem", None)
    return mem if mem is not None else a


def address(a) -> int:
    """The address of a's first element."""
    if isinstance(a, np.ndarray):
        return a.ctypes.data if _array_address is None else _array_address(a)
    return a.data.ptr


try:    # (read from the array itself: NumPy's a.ctypes makes a helper object per call, microseconds)
    from lazytensor.core._address import address as _array_address, setup as _setup_address
    _setup_address(np.ndarray)
except ImportError:     # not compiled (setup.py): NumPy's way
    _array_address = None


def owner_address(own) -> int:
    if isinstance(own, np.ndarray):
        return own.ctypes.data
    interface = getattr(own, "__array_interface__", None)
    if interface is not None:
        return interface["data"][0]
    return own.ptr


def extent(a) -> tuple:
    """(lowest, one past the highest) byte address a reads; (0, 0) when it is empty."""
    lo = hi = address(a)
    for n, s in zip(a.shape, a.strides):
        if n == 0:
            return (0, 0)
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi + a.itemsize


def may_overlap(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return np.may_share_memory(a, b)
    (alo, ahi), (blo, bhi) = extent(a), extent(b)
    return alo < bhi and blo < ahi
