"""How a CUDA reduction kernel walks its input, planned on the host from shapes, strides and addresses
alone (no CuPy here, so CI renders every kernel the GPU would run).

Design: docs/design/cuda-kernels.md, section "kernels/cuda/reduce_layout.py".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lazytensor.kernels.cuda.layout import BLOCK, RUNTIME, VECTOR_BYTES, element_strides, vector_width

KEPT, REDUCED = "k", "r"
LOADS_IN_FLIGHT_BYTES = 64     # per thread per loop step: enough bytes in flight to cover DRAM latency
MAX_UNROLL = 4
MOMENT_LANES = 4               # var/meanvar: at most this many outputs (or vector lanes) per thread. Each
                               # lane holds four doubles (lt_moments' mean and M2, the run's two sums):
                               # eight float16 lanes took 96 registers, two blocks per SM and 32 KB of
                               # loads in flight per SM, too few to cover DRAM latency (1.44x the floor
                               # on the H200); four lanes with twice the unroll keep 64 bytes in flight
                               # per thread at four blocks per SM (1.13x)
MOMENT_BLOCKS_PER_SM = 4       # and their kernels are compiled for four resident blocks (at most 64
                               # registers): with the same 61 registers, ptxas's schedule for this
                               # occupancy read (64, 224, 224, 64) float16 in 100 us, not 111
FINISH_WARP_MIN_CHUNKS = 16    # from this many chunks on, a warp (not one thread) combines an output's
FINISH_BLOCK_MIN_CHUNKS = 128  # and from this many on, a whole block
STRUCTURE_BLOCKS_PER_SM = 4    # the occupancy the loop-shape choice assumes, so the kernel's structure
                               # is known before it is compiled (its real occupancy sets the chunks)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class ReduceLayout:
    """The structural part of a reduction kernel's indexing: its cache key together with the program
    and the accumulator. Extents, strides, K, R and the chunk count are kernel arguments."""
    shape: str             # "rows" or "columns"
    kept_ndim: int         # collapsed kept dimensions
    reduced_ndim: int      # collapsed reduced dimensions (>= 1; a virtual one of extent 1 if none)
    access: tuple          # per operand: stride classes of the kept dims, then of the reduced dims
    vector: int            # elements per load along the innermost dimension
    unroll: int            # loads in flight per thread per step
    group: int             # rows: threads per output (BLOCK: the whole block); columns: threads along k
    tail: bool             # rows with one flat dimension not a multiple of the vector: a scalar tail
    index64: bool

    @property
    def row_slots(self) -> int:
        """columns: threads of a block that split the reduced rows."""
        return BLOCK // self.group

    def stride_args(self) -> tuple:
        """(operand, dim) of each runtime stride argument, dims numbered kept first, then reduced."""
        return tuple((k, d) for k, acc in enumerate(self.access) for d, cls in enumerate(acc) if cls == RUNTIME)


@dataclass(frozen=True)
class ReduceGeometry:
    layout: ReduceLayout
    kept_extents: tuple
    reduced_extents: tuple
    strides: tuple         # per operand, element strides over kept then reduced dims
    K: int                 # outputs
    R: int                 # elements reduced into each
    chunks: int            # pieces each output's r range is cut into (1: no second kernel)
    grid: tuple
    notes: tuple = ()      # why the kernel does not use vector loads, when it does not

    @property
    def runtime_args(self) -> tuple:
        """Integers after the pointers: K, R, chunks, the extents, the runtime strides."""
        strides = tuple(self.strides[k][d] for k, d in self.layout.stride_args())
        return (self.K, self.R, self.chunks, *self.kept_extents, *self.reduced_extents, *strides)

    def config(self) -> str:
        lay = self.layout
        threads = (f"{lay.group} threads per output" if lay.shape == "rows" else
                   f"{lay.group} threads along outputs x {lay.row_slots} row slots")
        text = (f"loop shape '{lay.shape}', grid={self.grid}, block=({BLOCK},), {threads}, "
                f"{self.chunks} chunk{'s' if self.chunks > 1 else ''} of the reduced range")
        if self.chunks > 1:
            text += " (partial states, then a combining kernel)"
        return text


def collapse_tagged(shape: tuple, tags: tuple, strides: list) -> tuple:
    """-> (extents, tags, per-operand strides): extent-1 dimensions dropped, neighbours of one tag
    merged where every operand is contiguous across the pair."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    extents, out_tags, out = [], [], [[] for _ in strides]
    for d in dims:
        if extents and out_tags[-1] == tags[d] and all(o[-1] == s[d] * shape[d] for o, s in zip(out, strides)):
            extents[-1] *= shape[d]
            for o, s in zip(out, strides):
                o[-1] = s[d]
        else:
            extents.append(shape[d])
            out_tags.append(tags[d])
            for o, s in zip(out, strides):
                o.append(s[d])
    return extents, out_tags, [list(o) for o in out]


def _classes(strides) -> tuple:
    return tuple(s if s in (0, 1) else RUNTIME for s in strides)


def _vector_plan(inner: int, extent: int, strides: list, itemsizes: list, addresses: list, allow_tail: bool):
    """-> (width, notes) for vector loads along collapsed dimension `inner`."""
    notes = []
    read = [k for k, s in enumerate(strides) if s[inner] == 1]
    for k, s in enumerate(strides):
        if s[inner] not in (0, 1):
            notes.append(f"in{k} is strided along the innermost dimension")
    if not read and not notes:
        notes.append("no operand is contiguous along the innermost dimension")
    if notes:
        return 1, tuple(notes)
    width = vector_width([itemsizes[k] for k in read])
    if not allow_tail:
        while width > 1 and extent % width:
            width //= 2
        if width == 1:
            return 1, (f"the innermost extent {extent} is odd",)
    for k in read:
        if addresses[k] % VECTOR_BYTES:
            notes.append(f"in{k} is not {VECTOR_BYTES}-byte aligned")
        elif any(s % width for d, s in enumerate(strides[k]) if d != inner):
            notes.append(f"in{k} has an outer stride that is not a multiple of {width}")
    return (1, tuple(notes)) if notes else (width, ())


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def plan_reduction(in_shape: tuple, axes: tuple, inputs, input_itemsizes: list, sm_count: int,
                   blocks_per_sm: int, max_lanes: int | None = None) -> ReduceGeometry:
    """The layout and grid of a reduction over `axes` of `in_shape` reading `inputs`: a sequence of
    (shape, strides in bytes, address), each broadcasting to in_shape. `blocks_per_sm`: resident
    blocks of the kernel per SM (the chunk count fills one wave of the GPU). `max_lanes`: a cap on
    the vector width for accumulators too large to hold many of per thread (MOMENT_LANES)."""
    tags = tuple(REDUCED if d in axes else KEPT for d in range(len(in_shape)))
    K = int(np.prod([e for e, t in zip(in_shape, tags) if t == KEPT], dtype=np.int64))
    R = int(np.prod([e for e, t in zip(in_shape, tags) if t == REDUCED], dtype=np.int64))
    strides = [element_strides(in_shape, shape, st, size) for (shape, st, _), size in zip(inputs, input_itemsizes)]
    extents, ctags, cstrides = collapse_tagged(tuple(in_shape), tags, strides)
    # Kept dims first, then reduced, each in C order: offsets are koff(k) + roff(r).
    kept = [d for d, t in enumerate(ctags) if t == KEPT]
    reduced = [d for d, t in enumerate(ctags) if t == REDUCED]
    kept_extents = [extents[d] for d in kept]
    reduced_extents = [extents[d] for d in reduced]
    per_operand = [[s[d] for d in kept] + [s[d] for d in reduced] for s in cstrides]
    shape = "rows" if not ctags or ctags[-1] == REDUCED else "columns"
    if not reduced:                 # nothing left to reduce (extent-1 axes): one element per output
        reduced_extents = [1]
        per_operand = [s + [0] for s in per_operand]
    nk, nr = len(kept_extents), len(reduced_extents)
    addresses = [a for _, _, a in inputs]
    empty = K == 0 or R == 0

    if shape == "rows":
        inner = nk + nr - 1
        allow_tail = K == 1 and nr == 1
        vector, notes = (1, ()) if empty or not inputs else _vector_plan(
            inner, reduced_extents[-1], per_operand, input_itemsizes, addresses, allow_tail)
        if not inputs:
            notes = ("no array operand",)
    else:
        inner = nk - 1
        vector, notes = (1, ()) if empty or not inputs else _vector_plan(
            inner, kept_extents[-1], per_operand, input_itemsizes, addresses, False)
    max_unroll = MAX_UNROLL
    if max_lanes and vector > max_lanes:
        vector = max_lanes                 # narrower loads, more of them: the same bytes in flight
        step_bytes = sum(vector * size for size in input_itemsizes)
        max_unroll = 2 * MAX_UNROLL
    else:
        step_bytes = sum((VECTOR_BYTES if vector > 1 else size) for size in input_itemsizes) or 1
    tail = shape == "rows" and vector > 1 and R % vector != 0
    unroll = max(1, min(max_unroll, LOADS_IN_FLIGHT_BYTES // step_bytes))

    wave = max(1, sm_count * blocks_per_sm)
    if shape == "rows":
        steps = -(-R // vector)                   # vector loads along one output's reduced range
        few_outputs = K * 32 < sm_count * STRUCTURE_BLOCKS_PER_SM * BLOCK
        if K == 1 or (few_outputs and steps >= 4 * BLOCK * unroll):
            group = BLOCK
            chunks = max(1, min(-(-wave // max(K, 1)), steps // (BLOCK * unroll * 2)))
            grid = (max(1, K * chunks),)
        else:
            group = min(32, _pow2_at_least(steps))
            chunks = 1
            grid = (max(1, -(-K // (BLOCK // group))),)
    else:
        group = min(BLOCK, _pow2_at_least(-(-K // vector)))
        row_slots = BLOCK // group
        columns = max(1, -(-K // (group * vector)))
        chunks = max(1, min(-(-wave // columns), R // (row_slots * unroll * 4)))
        grid = (columns, chunks)
    if empty:
        chunks = 1

    reach = max((sum(abs(s) * (e - 1) for s, e in zip(st, kept_extents + reduced_extents)) for st in per_operand),
                default=0)
    index64 = max(K * R, reach, K * chunks) + (1 << 24) > _INT32_MAX
    access = tuple(_classes(s) for s in per_operand)
    layout = ReduceLayout(shape, nk, nr, access, vector, unroll, group, tail, index64)
    return ReduceGeometry(layout, tuple(kept_extents), tuple(reduced_extents), tuple(tuple(s) for s in per_operand),
                          K, R, chunks, grid, notes)


@dataclass(frozen=True)
class FinishLayout:
    """The combining kernel: `group` threads per output (1, a warp, or the whole block)."""
    group: int
    index64: bool


def plan_finish(K: int, chunks: int) -> tuple:
    """-> (FinishLayout, grid) of the kernel combining `chunks` partial states of each of K outputs.
    Its time is latency: dependent loads and merges, one after another in each thread. A thread per
    output walks every chunk; from FINISH_WARP_MIN_CHUNKS on a warp shares them, from
    FINISH_BLOCK_MIN_CHUNKS on a block does (a warp walking 528 chunks of moments took 8 to 11 us
    on the H200, against 12 us for the read of a 51 MB tensor)."""
    group = (BLOCK if chunks >= FINISH_BLOCK_MIN_CHUNKS else
             32 if chunks >= FINISH_WARP_MIN_CHUNKS else 1)
    index64 = K * max(chunks, 1) * max(group, 32) + (1 << 24) > _INT32_MAX
    return FinishLayout(group, index64), (max(1, -(-K * group // BLOCK)),)
