"""Const: a scalar in an expression, and the table that makes one object per scalar a loop
writes again and again."""
from __future__ import annotations

import numpy as np

from lazytensor.core.structure_ids import structure_id


class Const:
    """A scalar in an expression; its value becomes a kernel argument, never source text."""
    __slots__ = ("value", "dtype", "skey", "scalars")
    shape = ()
    device = None
    heavy = False
    shared = False
    leaves = ()

    def __init__(self, value, dtype):
        # One Python type per dtype kind, so that a program's scalar dtypes fix the types its kernel
        # is called with (a kernel's compiled entry is kept by program: lazytensor.kernels.cpu.backend).
        kind = dtype.kind
        if kind == "u" and dtype.itemsize == 8:
            value = np.uint64(value)    # a Python int would reach numba as int64 and overflow at 2**63
        elif kind == "f":
            value = float(value)        # any size of int reaches the kernel as a float (too large raises, as NumPy)
        elif kind in "iu":
            value = int(value)          # (True in an integer loop: 1)
        elif kind == "b":
            value = bool(value)
        elif kind == "c":
            value = complex(dtype.type(value)) if dtype.itemsize == 8 else complex(value)   # (complex64: rounded, as NumPy casts)
        elif kind == "V":               # bfloat16 (ml_dtypes): rounded here, as NumPy rounds a Python
            value = float(dtype.type(np.float32(value) if type(value) is float else value))  # float: through float32
        limit = _ROUNDED_ABOVE.get(dtype)
        if limit is not None and type(value) is float and abs(value) > limit:
            # NumPy casts a weak Python float to the op's dtype at the op: out of the dtype's range it
            # becomes inf, with NumPy's own overflow warning, here on the line that built the node
            # (not later, each time a kernel's argument is converted).
            value = float(dtype.type(value))
        self.value = value
        self.dtype = dtype
        skey = _const_keys.get(dtype)
        self.skey = skey if skey is not None else _const_key(dtype)
        self.scalars = (value,)


_const_keys: dict = {}
# Python floats above these magnitudes are rounded to the Const's dtype when it is built: every
# float16 value (its kernels take it as a float32 argument), and float32 values beyond its range.
_ROUNDED_ABOVE = {np.dtype(np.float16): 0.0, np.dtype(np.float32): float(np.finfo(np.float32).max)}


# (type, value, dtype) -> its Const: a scalar that a loop writes again and again (`5 * d`) is one
# object, made once. Left out: float zeros (0.0 == -0.0 would share a key) and NaN, and the values
# a Const rounds when it is built, whose overflow warning belongs to every line that builds one.
_consts: dict = {}


def constant(value, dtype, table=None) -> Const:
    """Const(value, dtype), the same object for the same scalar of the same type and dtype.
    table: where a caller for which type and dtype are fixed keeps its own, by value alone (binary's
    cases: one lookup of a small int or float, not of a tuple holding a dtype)."""
    if table is None:
        table, key, most = _consts, (type(value), value, dtype), 4096
    else:
        key, most = value, 256      # (a case's own: a loop over ever new values fills it alone)
    c = table.get(key)
    if c is None:
        c = Const(value, dtype)
        limit = _ROUNDED_ABOVE.get(dtype)
        if type(value) is float and (value == 0.0 or value != value or (limit is not None and abs(value) > limit)):
            return c
        if type(value) is complex:      # (0j == -0j, and NaN parts: never one key)
            return c
        if len(table) > most:
            table.clear()
        table[key] = c
    return c


def _const_key(dtype) -> int:
    k = _const_keys[dtype] = structure_id(("scalar", dtype))
    return k
