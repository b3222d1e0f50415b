"""The kernel IR: an elementwise cluster flattened to straight-line SSA code.

Design: docs/design/kernels.md, section "kernels/program.py".
"""
from __future__ import annotations

import functools

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class ElementwiseProgram:
    """Programs are interned (see `program_for`): one object per structure, hashed by identity,
    so the per-assignment cache lookup never rehashes the instruction list."""
    instrs: tuple          # SSA instructions, see the module docstring
    n_inputs: int          # array operands, in kernel-argument order
    scalar_dtypes: tuple   # dtype of each scalar argument, in order
    out_dtype: np.dtype    # the destination's dtype: the result is converted to it on store
    relu_mask: bool = False  # also write the bits (result > 0), 8 per byte, low bit first, to a
                             # second output: the ReLU mask a backward pass needs (flat layout only)
    outputs: tuple = ()      # several results: (value id, dtype) per output array, out first;
                             # empty for the usual one result, the last value, stored as out_dtype

    @property
    def result(self) -> int:
        return self.outputs[0][0] if self.outputs else len(self.instrs) - 1

    def stores(self) -> tuple:
        """(value id, dtype) of each output array, `out` first."""
        return self.outputs or ((len(self.instrs) - 1, self.out_dtype),)

    def input_dtypes(self) -> list:
        dtypes = [None] * self.n_inputs
        for ins in self.instrs:
            if ins[0] == "load":
                dtypes[ins[2]] = ins[1]
        return dtypes

    def operand_dtypes(self) -> list:
        """The dtypes of the array arguments after `out`: the inputs, then out1, out2, ... (the
        launchers index the extra outputs like inputs of the destination's shape)."""
        return self.input_dtypes() + [dtype for _, dtype in self.outputs[1:]]


_programs: dict = {}


def program_for(instrs: tuple, n_inputs: int, scalar_dtypes: tuple, out_dtype, relu_mask=False,
                outputs: tuple = ()) -> ElementwiseProgram:
    key = (instrs, n_inputs, scalar_dtypes, out_dtype, relu_mask, outputs)
    program = _programs.get(key)
    if program is None:
        outputs = tuple((vid, np.dtype(dt)) for vid, dt in outputs)
        program = _programs.setdefault(
            key, ElementwiseProgram(instrs, n_inputs, scalar_dtypes, np.dtype(out_dtype), relu_mask, outputs))
    return program


def multi_output_program(instrs: tuple, n_inputs: int, scalar_dtypes: tuple, outputs: tuple) -> ElementwiseProgram:
    """A program storing the values `outputs` ((value id, dtype), ...) into as many arrays."""
    if len(outputs) == 1 and outputs[0][0] == len(instrs) - 1:
        return program_for(instrs, n_inputs, scalar_dtypes, outputs[0][1])
    return program_for(instrs, n_inputs, scalar_dtypes, outputs[0][1], outputs=tuple(outputs))


def with_relu_mask(program: ElementwiseProgram) -> ElementwiseProgram:
    return program_for(program.instrs, program.n_inputs, program.scalar_dtypes, program.out_dtype, True)


@dataclass(frozen=True)
class Layout:
    """How each array operand is indexed, relative to the destination's shape.

    flat: every operand (destination included) is C-contiguous with the destination's shape,
    so one flat index serves all. Otherwise `masks[i]` tells, for operand i right-aligned to
    the destination's dimensions, which of its dimensions vary (True) and which broadcast (False).
    """
    ndim: int
    flat: bool
    masks: tuple = ()


def layout_of(out_shape: tuple, operand_shapes, all_contiguous: bool) -> Layout:
    if all_contiguous and all(s == out_shape for s in operand_shapes):
        return Layout(len(out_shape), True)
    return _broadcast_layout(tuple(out_shape), tuple(operand_shapes))


@functools.lru_cache(maxsize=4096)
def _broadcast_layout(out_shape: tuple, operand_shapes: tuple) -> Layout:
    """Remembered: a kernel launched again over the same shapes (every training step) finds its
    layout without a walk over its operands' dimensions."""
    masks = []
    for shape in operand_shapes:
        offset = len(out_shape) - len(shape)
        masks.append(tuple(d == out_shape[offset + i] for i, d in enumerate(shape)))
    return Layout(len(out_shape), False, tuple(masks))


def describe(program: ElementwiseProgram) -> str:
    """One line per instruction, for explain."""
    lines = []
    for vid, ins in enumerate(program.instrs):
        op, dtype, *args = ins
        if op == "load":
            rhs = f"in{args[0]}[i]"
        elif op == "scalar":
            rhs = f"s{args[0]}"
        else:
            rhs = f"{op}(" + ", ".join(f"v{a}" for a in args) + ")"
        lines.append(f"v{vid}: {np.dtype(dtype).name} = {rhs}")
    for k, (vid, dtype) in enumerate(program.outputs):
        lines.append(f"{output_name(k)}[i] = v{vid} as {np.dtype(dtype).name}")
    return "\n".join(lines)


def output_name(k: int) -> str:
    """The kernel argument of output k: out, out1, out2, ..."""
    return f"out{k}" if k else "out"


@dataclass(frozen=True)
class Reduction:
    """What a reduction kernel computes from the values of an ElementwiseProgram evaluated over
    `in_shape`: reduce over `axes` (sorted, normalized), accumulate in `acc_dtype`, store `out_dtype`
    into an array of in_shape without the reduced axes.

    kind: sum prod max min any all argmax argmin mean var (std is var with `root`), and meanvar,
    which writes the mean and the variance (ddof) both, as out[0] and out[1] (out: (2,) + out_shape).
    For mean/var/std the kernel divides by the count (minus ddof) itself, so `x.mean()` is one kernel.
    The reduction order is fixed (blocked/pairwise), so results do not depend on the thread count."""
    kind: str
    axes: tuple
    in_shape: tuple
    acc_dtype: np.dtype
    out_dtype: np.dtype
    ddof: int = 0
    root: bool = False

    @property
    def out_shape(self) -> tuple:
        return tuple(d for i, d in enumerate(self.in_shape) if i not in self.axes)

    @property
    def count(self) -> int:
        n = 1
        for a in self.axes:
            n *= self.in_shape[a]
        return n


@dataclass(frozen=True)
class Segments:
    """Segments of a flat array of `length` elements: segment s is [starts[s], starts[s] + sizes[s]),
    in order, not overlapping (the parameters of a region, lazytensor.nn.regions). A segmented sum
    adds each segment's elements in the order a full sum over a 1-D array of that size takes, so
    that a segment's sum has the per-tensor sum's bits (kernels/cpu/render_numba_segments.py)."""
    starts: tuple
    sizes: tuple
    length: int
