"""How a CUDA elementwise kernel indexes its operands, planned on the host from shapes, strides and
addresses alone (no CuPy here, so CI can render every kernel the GPU would run).

Design: docs/design/cuda-kernels.md, section "kernels/cuda/layout.py".
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd

import numpy as np

from lazytensor.kernels.program import output_name

CONTIGUOUS = "contiguous"
RUNTIME = "s"                # a stride passed as a kernel argument
BLOCK = 256                  # threads per block
# One step per thread: on an H200 a 16-byte copy moves 4.24 TB/s with a thread per vector and 3.95
# with a grid-stride loop over 32 blocks per SM. The loop stays, for grids beyond this cap.
MAX_GRID = 2**31 - 1
VECTOR_BYTES = 16
MASK_GROUP = 8               # elements per byte of a ReLU mask: its kernels move a group per step
# The row loop: its per-channel loads are paid once per thread, so a thread takes several rows, and
# ROW_UNROLL of them per iteration with their loads issued before any store (memory-level
# parallelism: the loads of one iteration do not wait for each other). On an H200, relu((x-m)*s*g+b)
# over (2^22, 64) moved at 1.03x (float32) and 1.06x (float16) the copy floor with 4 and 4, against
# 1.14x and 1.23x for a step per thread; 2 and 2 or 8 and 8 gave float16 1.17x and 1.14x.
ROW_UNROLL = 4
ROW_STEPS = 4                # vector steps per thread the grid is sized for
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class CudaLayout:
    """The structural part of the indexing: the kernel cache key together with the program."""
    ndim: int          # collapsed dimensions, >= 1
    access: tuple      # per operand, destination first: CONTIGUOUS or a tuple of stride classes
    vector: int        # elements per thread per loop step (1: scalar loads)
    index64: bool      # 64-bit index arithmetic
    rows: int = 0      # the row loop (module docstring, 4.), unrolled `rows` steps; 0: the flat step

    def needed_dims(self) -> tuple:
        """Dimensions whose index some non-contiguous operand reads."""
        dims = set()
        for acc in self.access:
            if acc != CONTIGUOUS:
                dims.update(d for d, cls in enumerate(acc) if cls != 0)
        return tuple(sorted(dims))

    def extent_dims(self) -> tuple:
        """Dimensions whose extent the kernel takes as an argument: those below the outermost
        needed dimension, and that one too unless it is dimension 0 (which needs no modulo)."""
        dims = self.needed_dims()
        if not dims:
            return ()
        return tuple(range(max(dims[0], 1), self.ndim))

    def stride_args(self) -> tuple:
        """(operand, dim) of each runtime stride argument, in kernel-argument order."""
        return tuple((k, d) for k, acc in enumerate(self.access) if acc != CONTIGUOUS
                     for d, cls in enumerate(acc) if cls == RUNTIME)

    def has_tail(self) -> bool:
        """A vector kernel over one dimension leaves n % vector elements to a scalar tail."""
        return self.vector > 1 and self.ndim == 1

    def hoisted(self, k: int) -> bool:
        """Whether operand k (0: the destination) is read once per thread, before the row loop."""
        return self.rows > 0 and self.access[k] != CONTIGUOUS


@dataclass(frozen=True)
class LaunchGeometry:
    layout: CudaLayout
    n: int                 # elements written
    extents: tuple         # the collapsed shape
    runtime_args: tuple    # ints after the scalars: n, the extents of layout.extent_dims(), the runtime strides
    grid: int
    block: int
    strides: tuple = ()    # per operand, its element strides over the collapsed shape
    notes: tuple = ()      # why the kernel is scalar, when it is
    names: tuple = ()      # the operands' names, in layout order (explain)

    def config(self) -> str:
        return f"grid=({self.grid},), block=({self.block},)"


def collapse(shape: tuple, strides: list) -> tuple:
    """-> (extents, per-operand strides) with extent-1 dimensions dropped and dimensions merged
    where every operand is contiguous across the pair. `strides` are in elements, aligned to shape."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    if not dims:
        return (1,), [(1,) for _ in strides]
    extents = [shape[dims[0]]]
    out = [[s[dims[0]]] for s in strides]
    for d in dims[1:]:
        if all(o[-1] == s[d] * shape[d] for o, s in zip(out, strides)):
            extents[-1] *= shape[d]
            for o, s in zip(out, strides):
                o[-1] = s[d]
        else:
            extents.append(shape[d])
            for o, s in zip(out, strides):
                o.append(s[d])
    return tuple(extents), [tuple(o) for o in out]


def element_strides(out_shape: tuple, shape: tuple, strides: tuple, itemsize: int) -> tuple:
    """An operand's strides in elements, right-aligned to the destination; broadcast dims get 0."""
    offset = len(out_shape) - len(shape)
    result = [0] * len(out_shape)
    for d, (extent, stride) in enumerate(zip(shape, strides)):
        if stride % itemsize:
            raise ValueError(f"stride {stride} bytes is not a multiple of the item size {itemsize}: "
                             f"copy the array to make it contiguous")
        if extent != 1 or out_shape[offset + d] == 1:
            result[offset + d] = stride // itemsize
    return tuple(result)


def _classify(extents: tuple, strides: tuple):
    expected, step = [], 1
    for e in reversed(extents):
        expected.append(step)
        step *= e
    if tuple(reversed(expected)) == strides:
        return CONTIGUOUS
    return tuple(s if s in (0, 1) else RUNTIME for s in strides)


def vector_width(itemsizes: list) -> int:
    """Elements per 16-byte vector move for operands of these item sizes."""
    width = VECTOR_BYTES // min(itemsizes)
    while width > 1 and width * max(itemsizes) > 4 * VECTOR_BYTES:   # at most four 16-byte moves per operand
        width //= 2
    return width


def _vector_plan(extents, strides, access, itemsizes, addresses, names, relu_mask=False, first_output=None) -> tuple:
    """-> (vector width, notes): the width, or 1 and the reasons it is 1. Operands from
    `first_output` on are further outputs (a program with several), written like `out`."""
    notes = []
    vector_read = []
    first_output = len(access) if first_output is None else first_output
    for k, acc in enumerate(access):
        if acc == CONTIGUOUS or acc[-1] == 1:
            vector_read.append(k)
        elif acc[-1] != 0 or k == 0 or k >= first_output:
            notes.append(f"{names[k]} is strided in its innermost dimension")
    if notes:
        return 1, tuple(notes)
    width = vector_width([itemsizes[k] for k in vector_read])
    if relu_mask:      # a whole mask byte per step (32-byte moves for float32, 64 for float64)
        width = MASK_GROUP
    if len(extents) > 1:
        while width > 1 and extents[-1] % width:     # a narrower vector that divides the rows
            width //= 2
        if width == 1:
            notes.append(f"the innermost extent {extents[-1]} is odd")
    if width == 1:
        return 1, tuple(notes)
    for k in vector_read:
        if addresses[k] % VECTOR_BYTES:
            notes.append(f"{names[k]} is not {VECTOR_BYTES}-byte aligned")
        elif access[k] != CONTIGUOUS and any(s % width for s in strides[k][:-1]):
            notes.append(f"{names[k]} has an outer stride that is not a multiple of {width}")
    return (1, tuple(notes)) if notes else (width, ())


def _grid(work: int) -> int:
    return max(1, min(-(-work // BLOCK), MAX_GRID))


def _row_loop_grid(extents, access, vector, relu_mask, several_outputs=False) -> int:
    """The grid of the row loop, or 0 where the layout does not qualify (the flat step runs)."""
    if (len(extents) != 2 or vector == 1 or access[0] != CONTIGUOUS or several_outputs
            or any(acc != CONTIGUOUS and acc[0] != 0 for acc in access[1:])
            or relu_mask and vector != MASK_GROUP):      # a mask byte per vector step
        return 0
    chunks = extents[1] // vector
    steps = extents[0] * chunks
    multiple = chunks // gcd(chunks, BLOCK)      # grids whose thread count is a multiple of `chunks`
    if multiple * BLOCK > steps:                 # few rows of an odd chunk count: most threads would idle
        return 0
    grid = -(-steps // (BLOCK * ROW_STEPS))
    grid = -(-grid // multiple) * multiple
    return grid if grid <= MAX_GRID else 0


def plan_launch(program, out_shape: tuple, out_strides: tuple, out_address: int, inputs) -> LaunchGeometry:
    """The layout and launch geometry of `program` writing an array of `out_shape`/`out_strides`
    (bytes) at `out_address`, reading `inputs`: a sequence of (shape, strides in bytes, address).
    A program with several outputs takes out1, out2, ... after its inputs, in `inputs`."""
    itemsizes = [program.out_dtype.itemsize] + [np.dtype(d).itemsize for d in program.operand_dtypes()]
    n = 1
    for e in out_shape:
        n *= e
    strides = [element_strides(out_shape, out_shape, out_strides, itemsizes[0])]
    strides += [element_strides(out_shape, shape, st, itemsizes[k + 1]) for k, (shape, st, _) in enumerate(inputs)]
    extents, strides = collapse(tuple(out_shape), strides)
    access = tuple(_classify(extents, s) for s in strides)
    addresses = [out_address] + [a for _, _, a in inputs]
    names = operand_names(program)
    several = len(program.outputs) > 1
    vector, notes = _vector_plan(extents, strides, access, itemsizes, addresses, names, program.relu_mask,
                                 1 + program.n_inputs)
    grid = _row_loop_grid(extents, access, vector, program.relu_mask, several)
    rows = ROW_UNROLL if grid else 0
    grid = grid or _grid(n // vector if vector > 1 else n)
    reach = max(sum(abs(s) * (e - 1) for s, e in zip(st, extents)) for st in strides) + vector
    # The loop bound: the row loop tests j + (rows - 1) * step against the vector count.
    index64 = n + grid * BLOCK * vector * max(rows, 1) > _INT32_MAX or reach > _INT32_MAX
    layout = CudaLayout(len(extents), access, vector, index64, rows)
    args = [n] + [extents[d] for d in layout.extent_dims()] + [strides[k][d] for k, d in layout.stride_args()]
    return LaunchGeometry(layout, n, extents, tuple(args), grid, BLOCK, tuple(strides), notes, tuple(names))


def flat_geometry(program, n: int, addresses: list) -> LaunchGeometry:
    """The geometry of the common case, every operand C-contiguous with the destination's shape:
    one dimension of n elements. `addresses`: destination first, then the inputs."""
    return plan_launch(program, (n,), (program.out_dtype.itemsize,), addresses[0],
                       [((n,), (np.dtype(d).itemsize,), a) for d, a in zip(program.operand_dtypes(), addresses[1:])])


def operand_names(program) -> list:
    """The kernel's array arguments in layout order: out, in0, in1, ..., then out1, out2, ..."""
    return (["out"] + [f"in{k}" for k in range(program.n_inputs)]
            + [output_name(k) for k in range(1, len(program.outputs))])
