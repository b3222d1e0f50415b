"""Single items and small slices of a CPU Tensor, at NumPy's cost: `t[3] = 0.5`, `t[i, i] = v`,
`t[0:1] = 0`, `t[...] = 0`, and reading `float(t[3])`.

The general write builds a view, a constant node, and a kernel, tens of microseconds for one
element. Where a CPU Tensor's memory has no live reader left (core.readers: the expressions built
on it were settled or are gone), a scalar value and a basic index (ints, slices, Ellipsis, None)
write straight into the NumPy array, with the casting rule of every assignment (the weak Python
scalars of NEP 50 under 'same_kind'); anything else takes the general path, which raises its errors.
"""
from __future__ import annotations

import operator

import numpy as np

from lazytensor.core.readers import memory_of

_BASIC = frozenset((int, slice, type(Ellipsis), type(None), np.intp, np.int64, np.int32))
# dtype kinds a weak Python scalar may be written into ('same_kind'; as assign.evaluate._as_expression)
_WEAK_KINDS = {float: "fc", int: "iufc", bool: "biufc"}
_strong: dict = {}      # (value dtype, tensor dtype) -> whether 'same_kind' allows the write


def write_scalar(dest, key, value) -> bool:
    """dest[key] = value done directly, True; False (nothing done) where the general path must."""
    tv = type(value)
    kinds = _WEAK_KINDS.get(tv)
    if kinds is None:
        if tv is np.ndarray:
            if value.ndim:
                return False
        elif not isinstance(value, np.generic):
            return False
        pair = (value.dtype, dest.dtype)
        ok = _strong.get(pair)
        if ok is None:
            ok = _strong[pair] = bool(np.can_cast(*pair, casting="same_kind")) and value.dtype.kind in "biufc"
        if not ok:
            return False
    elif dest.dtype.kind not in kinds:
        return False
    if dest.device != "cpu":
        return False
    tk = type(key)
    if tk is tuple:
        for k in key:
            if type(k) not in _BASIC:
                return False
    elif tk not in _BASIC:
        return False
    m = dest.memory
    if m is None:
        m = memory_of(dest)
    if m and m.read():
        return False        # a live expression reads this memory: the general path settles it first
    try:
        dest.data[key] = value
    except ValueError:
        return False        # read-only: the general path says so in its words
    m.version += 1
    return True


_INPLACE = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul}
_SCALARS = (int, float)


def inplace_scalar(dest, op, other) -> bool:
    """`dest op= other` done on dest's item as NumPy does it, True, for a 0-d CPU Tensor (an item
    view, `t[3] += 1`) of a numeric dtype nothing reads, a Python int or float `other`, and add,
    subtract or multiply: NumPy 2's promotion and 'same_kind' cast are lazytensor's. False
    (nothing done) otherwise."""
    arithmetic = _INPLACE.get(op)
    if arithmetic is None or type(other) not in _SCALARS or dest.shape or dest.device != "cpu" \
            or dest.dtype.kind not in "iuf":
        return False
    m = dest.memory
    if m is None:
        m = memory_of(dest)
    if m and m.read():
        return False
    if type(other) is float and dest.dtype.kind != "f":
        return False        # the general path raises its 'same_kind' TypeError
    d = dest.data
    if not d.flags.writeable:
        return False        # the general path says so in its words
    # NumPy's `a[3] += 1` is arithmetic on the item a[3] gives, a NumPy scalar (its overflow
    # warnings too), written back; in d's dtype: `other` is weak, of a kind d's dtype holds
    d[()] = arithmetic(d[()], other)
    m.version += 1
    return True


def written_back(dest, key, value) -> bool:
    """Whether `dest[key] = value` writes an item view of dest onto itself (the end of `t[3] += 1`):
    then only the write count goes up, as on the general path."""
    view_of = value.view_of
    if view_of is None or view_of[0] is not dest or len(view_of[1]) != 1:
        return False
    tk = type(key)
    if tk is int:
        canonical = (key, Ellipsis)
    elif tk is tuple:
        canonical = (*key, Ellipsis)
    else:
        return False
    if view_of[1][0][0] != ("index", canonical):
        return False
    m = dest.memory
    if m is None:
        m = memory_of(dest)
    m.version += 1
    return True
