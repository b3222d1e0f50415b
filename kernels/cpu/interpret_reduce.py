"""The interpreter tier's reductions: the program's values computed a piece at a time (never the whole
input, nor a broadcast at full size), float sums, means and products accumulated in the order the
numba kernel accumulates them (kernels/cpu/render_numba_reduce.py), so a value keeps its bits when
the compiled kernel takes over. Other kinds are exact in any order (integers wrap, max, min, any,
all, arg-reductions); variances come from NumPy's two passes, within rounding of the kernel's Welford.

Design: docs/design/tiers.md.
"""
from __future__ import annotations

import math

import numpy as np

from lazytensor.kernels.cpu.interpret import converted_scalars, evaluate_block, operand_block
from lazytensor.kernels.cpu.render_numba_reduce import LANES, strategy
from lazytensor.kernels.program import ElementwiseProgram, Reduction

# Elements of the program's values one piece holds (float64: 8 MiB).
PIECE = 1 << 20
_F64 = np.dtype(np.float64)


def run_reduction(program: ElementwiseProgram, spec: Reduction, out: np.ndarray, inputs, scalars,
                  nchunks: int) -> None:
    """out[...] = the reduction `spec` of the program's values over spec.in_shape; `nchunks`: the
    chunks the kernel cuts its first reduced axis into (for the "chunks" loop shape)."""
    with np.errstate(all="ignore"):
        if spec.kind in ("sum", "mean", "prod") and spec.acc_dtype.kind == "f" and spec.axes:
            result = _ordered(program, spec, inputs, scalars, nchunks)
            if spec.kind == "mean":
                result = result / float(spec.count)
        else:
            result = _by_numpy(program, spec, inputs, scalars)
        out[...] = np.asarray(result).reshape(out.shape).astype(spec.out_dtype)


class _Values:
    """The program's values over slices of the input shape."""

    def __init__(self, program, spec, inputs, scalars):
        self.program, self.shape = program, spec.in_shape
        self.inputs, self.scalars = inputs[:program.n_inputs], scalars
        self.scalar_values = converted_scalars(program, scalars)

    def __call__(self, index: tuple) -> np.ndarray:
        """The values of the piece `index` (a slice per dimension), at the piece's full shape."""
        shape = self.shape
        blocks = [operand_block(a, shape, index) for a in self.inputs]
        values = evaluate_block(self.program, blocks, self.scalars, self.scalar_values)
        piece = tuple(len(range(*s.indices(d))) for s, d in zip(index, shape))
        return np.broadcast_to(values[self.program.result], piece)


def _slices(shape, axis=None, lo=0, hi=None):
    """Pieces of `shape` along `axis` within [lo, hi), of about PIECE elements each (at least one
    index of the axis), as (index, start, stop)."""
    whole = [slice(None)] * len(shape)
    if axis is None:
        yield tuple(whole), 0, 0
        return
    hi = shape[axis] if hi is None else hi
    slab = math.prod(shape) // shape[axis] if shape[axis] else 0
    step = max(1, PIECE // max(slab, 1))
    for start in range(lo, hi, step):
        stop = min(hi, start + step)
        index = list(whole)
        index[axis] = slice(start, stop)
        yield tuple(index), start, stop


def _columns(values: np.ndarray, kept: list, reduced: list) -> np.ndarray:
    """values as a C-contiguous float64 (reduced elements in C order, kept elements) matrix."""
    moved = values.transpose(reduced + kept)
    r = math.prod(values.shape[d] for d in reduced)
    return np.array(moved, _F64, order="C").reshape(r, -1)


def _fold(acc: np.ndarray, m: np.ndarray, multiply: bool) -> np.ndarray:
    """acc (per column) combined with m's rows in order: ((acc + m[0]) + m[1]) + ..., as a loop
    does. NumPy reduces the rows of a matrix of two or more columns one after the other; one column
    it would sum pairwise, so that takes the running sum (its last row copied: a view would keep
    the whole running sum alive)."""
    if m.shape[0] == 0:
        return acc
    if multiply:
        m[0] *= acc
        return np.cumprod(m, axis=0)[-1].copy() if m.shape[1] == 1 else np.multiply.reduce(m, axis=0)
    m[0] += acc
    return np.cumsum(m, axis=0)[-1].copy() if m.shape[1] == 1 else np.add.reduce(m, axis=0)


def _ordered(program, spec: Reduction, inputs, scalars, nchunks: int) -> np.ndarray:
    """The float sum or product in the kernel's order, in float64, over the kept elements (C order)."""
    shape, axes = spec.in_shape, list(spec.axes)
    nd = len(shape)
    kept = [d for d in range(nd) if d not in axes]
    k = math.prod(shape[d] for d in kept)
    multiply = spec.kind == "prod"
    if math.prod(shape) == 0:
        return (np.ones(k) if multiply else np.zeros(k)).reshape(spec.out_shape)
    values = _Values(program, spec, inputs, scalars)
    if strategy(spec) == "rows":
        # one pass per kept element; a sum adds each run along the last axis into a partial sum first
        result = np.empty(k, _F64)
        lead = kept[0]
        inner = k // shape[lead]
        for index, start, stop in _slices(shape, lead):
            piece = values(index)
            if multiply:
                part = _fold(np.ones((stop - start) * inner), _columns(piece, kept, axes), True)
            else:
                last = axes[-1]
                rows = _columns(piece, kept + axes[:-1], [last])       # (run, kept x outer)
                runs = _fold(np.zeros(rows.shape[1]), rows, False)
                outer = runs.reshape(-1, math.prod(shape[d] for d in axes[:-1]))   # (kept, outer)
                part = _fold(np.zeros(outer.shape[0]), np.ascontiguousarray(outer.T), False)
            result[start * inner:stop * inner] = part
        return result.reshape(spec.out_shape)
    r0 = axes[0]
    extent = shape[r0]
    lanes = not kept and nd == 1 and not multiply
    partials = []
    for c in range(nchunks):
        lo, hi = c * extent // nchunks, (c + 1) * extent // nchunks
        if lanes:
            partials.append(_lanes(values, shape, lo, hi))
            continue
        acc = np.ones(k) if multiply else np.zeros(k)
        for index, _, _ in _slices(shape, r0, lo, hi):
            acc = _fold(acc, _columns(values(index), kept, axes), multiply)
        partials.append(acc)
    total = np.ones(k) if multiply else np.zeros(k)
    for part in partials:
        total = total * part if multiply else total + part
    return total.reshape(spec.out_shape)


def _lanes(values, shape, lo: int, hi: int) -> np.ndarray:
    """One chunk of a full 1-D sum: LANES partial sums, element i into lane (i - lo) % LANES, the
    tail after the last full group into the chunk's sum, then the lanes in order."""
    groups = (hi - lo) // LANES
    lane = np.zeros(LANES)
    step = max(1, PIECE // LANES) * LANES
    for start in range(lo, lo + groups * LANES, step):
        stop = min(lo + groups * LANES, start + step)
        lane = _fold(lane, np.array(values((slice(start, stop),)), _F64, order="C").reshape(-1, LANES), False)
    total = 0.0
    for x in np.asarray(values((slice(lo + groups * LANES, hi),)), _F64).tolist():
        total += x
    for x in lane.tolist():
        total += x
    return np.array([total])


def _by_numpy(program, spec: Reduction, inputs, scalars):
    """Kinds whose result does not depend on the order (and variances), by NumPy's reductions over
    the whole input's values."""
    values = np.empty(spec.in_shape, program.out_dtype)
    from lazytensor.kernels.cpu.interpret import run_program
    run_program(program, values, inputs, scalars)
    axes, acc, kind = spec.axes, spec.acc_dtype, spec.kind
    if kind in ("sum", "prod"):
        return getattr(np, kind)(values, axis=axes, dtype=acc)
    if kind in ("max", "min"):
        return (np.max if kind == "max" else np.min)(values.astype(acc), axis=axes)
    if kind in ("any", "all"):
        return getattr(np, kind)(values, axis=axes)
    if kind in ("argmax", "argmin"):
        (axis,) = axes
        return getattr(np, kind)(values, axis=axis)
    if kind == "mean":
        return np.mean(values, axis=axes, dtype=acc)
    if kind == "var":
        result = np.var(values, axis=axes, dtype=acc, ddof=spec.ddof)
        return np.sqrt(result) if spec.root else result
    if kind == "meanvar":
        return np.stack([np.mean(values, axis=axes, dtype=acc), np.var(values, axis=axes, dtype=acc, ddof=spec.ddof)])
    raise ValueError(f"unknown reduction {kind!r}")
