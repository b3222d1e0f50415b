"""np.atleast_1d/2d/3d, np.split and np.array_split: views of the operand (reshapes and slices),
computing nothing, as NumPy returns views."""
from __future__ import annotations

import operator

import numpy as np

from lazytensor.core.operand import Operand
from lazytensor.ops.operands import operand
from lazytensor.ops.views import getitem, reshape


def _each(arys, shaped):
    out = tuple(shaped(operand(a)) for a in arys)
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys):
    """np.atleast_1d: 0-d operands as shape (1,); one operand returns one view, several a tuple."""
    return _each(arys, lambda x: reshape(x, (1,)) if x.ndim == 0 else x)


def atleast_2d(*arys):
    """np.atleast_2d: 0-d as (1, 1), 1-D (n,) as (1, n)."""
    return _each(arys, lambda x: reshape(x, (1,) * (2 - x.ndim) + tuple(x.shape)) if x.ndim < 2 else x)


def atleast_3d(*arys):
    """np.atleast_3d: 0-d as (1, 1, 1), 1-D (n,) as (1, n, 1), 2-D (m, n) as (m, n, 1)."""
    def shaped(x):
        if x.ndim == 0:
            return reshape(x, (1, 1, 1))
        if x.ndim == 1:
            return reshape(x, (1, x.shape[0], 1))
        return reshape(x, tuple(x.shape) + (1,)) if x.ndim == 2 else x
    return _each(arys, shaped)


def array_split(ary, indices_or_sections, axis=0) -> list:
    """np.array_split: views along `axis`, at the given indices or in that many near-equal parts
    (the first ones one longer)."""
    x = operand(ary)
    if x.ndim == 0:
        raise np.exceptions.AxisError(axis, 0)
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise np.exceptions.AxisError(axis, x.ndim)
    axis %= x.ndim
    n = x.shape[axis]
    points = _points(indices_or_sections, n)
    head = (slice(None),) * axis
    return [getitem(x, head + (slice(start, stop),)) for start, stop in zip(points[:-1], points[1:])]


def _points(indices_or_sections, n) -> list:
    if isinstance(indices_or_sections, Operand):
        indices_or_sections = indices_or_sections.numpy()
    if np.ndim(indices_or_sections) == 0:
        sections = operator.index(indices_or_sections)
        if sections <= 0:
            raise ValueError("number sections must be larger than 0.")
        each, extras = divmod(n, sections)
        sizes = [0] + extras * [each + 1] + (sections - extras) * [each]
        return [int(p) for p in np.cumsum(sizes)]
    return [0, *(operator.index(i) for i in indices_or_sections), n]


def split(ary, indices_or_sections, axis=0) -> list:
    """np.split: array_split, but a number of sections must divide the axis evenly."""
    x = operand(ary)
    if np.ndim(indices_or_sections.numpy() if isinstance(indices_or_sections, Operand) else indices_or_sections) == 0:
        sections = operator.index(indices_or_sections)
        n = x.shape[operator.index(axis)] if x.ndim else 0
        if n % sections:        # (sections=0: NumPy's ZeroDivisionError)
            raise ValueError("array split does not result in an equal division")
    return array_split(x, indices_or_sections, axis)
