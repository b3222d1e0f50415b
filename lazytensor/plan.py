"""The planner: one pass over an expression that returns the list of steps that will run.

`lt.explain` prints exactly this list. A purely elementwise expression is one FusedElementwise
step. When the destination is also read through a different index map (an overlapping view),
the expression is evaluated into a temporary first, as NumPy's "right side first" semantics need.
"""
from __future__ import annotations

import numpy as np

from lazytensor.lower import lower
from lazytensor.kernels.program import describe


class FusedElementwise:
    """One generated kernel: reads `inputs` (broadcast in the indexing), writes `out`."""
    __slots__ = ("backend", "program", "out", "inputs", "scalars", "note")

    def __init__(self, backend, program, out, inputs, scalars, note=""):
        self.backend = backend
        self.program = program
        self.out = out
        self.inputs = inputs
        self.scalars = scalars
        self.note = note

    def run(self):
        self.backend.run_elementwise(self.program, self.out, self.inputs, self.scalars)

    def describe(self, source: bool = True) -> str:
        head = (f"FusedElementwise on {self.backend.name}: {len(self.program.instrs)} values, "
                f"{self.program.n_inputs} array inputs, {len(self.scalars)} scalar arguments, "
                f"{self.out.size} elements of {self.program.out_dtype.name} {self.out.shape}")
        if self.note:
            head += f"\n  note: {self.note}"
        text = head + "\n" + _indent(describe(self.program))
        if source:
            text += "\n" + _indent(self.backend.explain_elementwise(self.program, self.out, self.inputs))
        return text


class Copy:
    """Copy a temporary into the destination (the aliasing case)."""
    __slots__ = ("backend", "program", "out", "src")

    def __init__(self, backend, program, out, src):
        self.backend, self.program, self.out, self.src = backend, program, out, src

    def run(self):
        self.backend.run_elementwise(self.program, self.out, [self.src], [])

    def describe(self, source: bool = True) -> str:
        return f"Copy on {self.backend.name}: temporary -> destination {self.out.shape}"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _root_base(a):
    while a.base is not None and not isinstance(a.base, (bytes, memoryview)):
        b = a.base
        if not hasattr(b, "base") or not hasattr(b, "shape"):
            break
        a = b
    return a


def aliased(out, inputs) -> bool:
    """True when an input shares memory with `out` but is read through another index map."""
    ob = None
    for a in inputs:
        if a is out:
            continue
        if ob is None:
            ob = _root_base(out)
        if _root_base(a) is not ob:
            continue
        if a.shape == out.shape and a.strides == out.strides and _address(a) == _address(out):
            continue
        if _may_overlap(a, out):
            return True
    return False


def _address(a) -> int:
    return a.ctypes.data if isinstance(a, np.ndarray) else a.data.ptr


def _may_overlap(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return np.may_share_memory(a, b)
    def extent(x):
        lo = hi = _address(x)
        for n, s in zip(x.shape, x.strides):
            if n == 0:
                return (0, 0)
            if s > 0:
                hi += (n - 1) * s
            else:
                lo += (n - 1) * s
        return lo, hi + x.itemsize
    (alo, ahi), (blo, bhi) = extent(a), extent(b)
    return alo < bhi and blo < ahi


def plan(root, out, backend) -> list:
    """Steps that evaluate `root` into the array `out` (already checked for shape, dtype, device)."""
    program, inputs, scalars = lower(root, out.dtype)
    if not aliased(out, inputs):
        return [FusedElementwise(backend, program, out, inputs, scalars)]
    tmp = backend.empty(out.shape, out.dtype)
    copy, _, _ = _copy_program(out.dtype)
    return [FusedElementwise(backend, program, tmp, inputs, scalars,
                             note="the destination is read through another index map: evaluated into a temporary"),
            Copy(backend, copy, out, tmp)]


def _copy_program(dtype):
    from lazytensor.kernels.program import program_for
    return program_for((("load", dtype, 0),), 1, (), dtype), None, None
