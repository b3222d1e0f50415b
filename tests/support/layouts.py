"""Layouts the CUDA codegen tests hand to plan_launch without allocating arrays."""
from __future__ import annotations


def contiguous_strides(shape, itemsize):
    """Row-major (C order) byte strides of `shape`."""
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))
