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
        if spec.kind in ("sum", "mean", "prod") and spec.acc_dtype.kind in "fc" and spec.axes:
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
        # An input of at most PIECE elements is computed once and its pieces sliced from it: the
        # parallel kernel's 64 chunks were 64 passes of the program's ufuncs (each element's value
        # is the same whichever block computes it).
        self.whole = None
        if math.prod(self.shape) <= PIECE:
            self.whole = self._computed(tuple(slice(None) for _ in self.shape))

    def __call__(self, index: tuple) -> np.ndarray:
        """The values of the piece `index` (a slice per dimension), at the piece's full shape (a
        view: read only)."""
        if self.whole is not None:
            return self.whole[index]
        return self._computed(index)

    def _computed(self, index: tuple) -> np.ndarray:
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


def _columns(values: np.ndarray, kept: list, reduced: list, acc=_F64) -> np.ndarray:
    """values as a C-contiguous matrix of `acc` (float64, or complex128 for complex values):
    reduced elements in C order, kept elements."""
    moved = values.transpose(reduced + kept)
    r = math.prod(values.shape[d] for d in reduced)
    return np.array(moved, acc, order="C").reshape(r, -1)


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
    acc = np.dtype(np.complex128) if spec.acc_dtype.kind == "c" else _F64
    if math.prod(shape) == 0:
        return (np.ones(k, acc) if multiply else np.zeros(k, acc)).reshape(spec.out_shape)
    values = _Values(program, spec, inputs, scalars)
    if strategy(spec) == "rows":
        # one pass per kept element; a sum adds each run along the last axis into a partial sum first
        result = np.empty(k, acc)
        lead = kept[0]
        inner = k // shape[lead]
        for index, start, stop in _slices(shape, lead):
            piece = values(index)
            if multiply:
                part = _fold(np.ones((stop - start) * inner, acc), _columns(piece, kept, axes, acc), True)
            else:
                last = axes[-1]
                rows = _columns(piece, kept + axes[:-1], [last], acc)       # (run, kept x outer)
                runs = _fold(np.zeros(rows.shape[1], acc), rows, False)
                outer = runs.reshape(-1, math.prod(shape[d] for d in axes[:-1]))   # (kept, outer)
                part = _fold(np.zeros(outer.shape[0], acc), np.ascontiguousarray(outer.T), False)
            result[start * inner:stop * inner] = part
        return result.reshape(spec.out_shape)
    r0 = axes[0]
    extent = shape[r0]
    lanes = not kept and nd == 1 and not multiply
    partials = []
    for c in range(nchunks):
        lo, hi = c * extent // nchunks, (c + 1) * extent // nchunks
        if lanes:
            partials.append(_lanes(values, shape, lo, hi, acc))
            continue
        part = np.ones(k, acc) if multiply else np.zeros(k, acc)
        for index, _, _ in _slices(shape, r0, lo, hi):
            part = _fold(part, _columns(values(index), kept, axes, acc), multiply)
        partials.append(part)
    total = np.ones(k, acc) if multiply else np.zeros(k, acc)
    for part in partials:
        total = total * part if multiply else total + part
    return total.reshape(spec.out_shape)


def _lanes(values, shape, lo: int, hi: int, acc=_F64) -> np.ndarray:
    """One chunk of a full 1-D sum: LANES partial sums, element i into lane (i - lo) % LANES, the
    tail after the last full group into the chunk's sum, then the lanes in order."""
    groups = (hi - lo) // LANES
    lane = np.zeros(LANES, acc)
    step = max(1, PIECE // LANES) * LANES
    for start in range(lo, lo + groups * LANES, step):
        stop = min(lo + groups * LANES, start + step)
        lane = _fold(lane, np.array(values((slice(start, stop),)), acc, order="C").reshape(-1, LANES), False)
    total = acc.type(0).item()
    for x in np.asarray(values((slice(lo + groups * LANES, hi),)), acc).tolist():
        total += x
    for x in lane.tolist():
        total += x
    return np.array([total])


def _by_numpy(program, spec: Reduction, inputs, scalars):
    """Kinds whose result does not depend on the order (and variances), by NumPy's reductions over
    pieces along the first reduced axis, combined: exact for integers (they wrap), max, min (NaN
    propagates), any, all and the arg-reductions (the first extreme, the first NaN)."""
    shape, axes, acc, kind = spec.in_shape, spec.axes, spec.acc_dtype, spec.kind
    values = _Values(program, spec, inputs, scalars)
    r0 = axes[0] if axes and math.prod(shape) else None
    result = None
    count = 0
    for index, start, _ in _slices(shape, r0):
        piece = values(index)
        if kind in ("sum", "prod"):
            part = getattr(np, kind)(piece, axis=axes, dtype=acc)
            result = part if result is None else (result + part if kind == "sum" else result * part)
        elif kind in ("max", "min"):
            part = (np.max if kind == "max" else np.min)(piece.astype(acc), axis=axes)
            result = part if result is None else (np.maximum if kind == "max" else np.minimum)(result, part)
        elif kind in ("any", "all"):
            part = getattr(np, kind)(piece, axis=axes)
            result = part if result is None else (result | part if kind == "any" else result & part)
        elif kind in ("argmax", "argmin"):
            (axis,) = axes
            local = getattr(np, kind)(piece, axis=axis)
            best = np.take_along_axis(piece, np.expand_dims(local, axis), axis).squeeze(axis).astype(acc)
            local = local + start
            if result is None:
                result, value = local, best
            else:
                better = (best > value) if kind == "argmax" else (best < value)
                better |= (best != best) & (value == value)
                result, value = np.where(better, local, result), np.where(better, best, value)
        elif kind in ("mean", "var", "meanvar"):
            # count, mean and sum of squared deviations per piece, combined (Chan et al.)
            x = piece.astype(np.float64)
            n = math.prod(x.shape[d] for d in axes)
            mean = np.mean(x, axis=axes, keepdims=True) if n else np.zeros([1 if d in axes else x.shape[d]
                                                                            for d in range(x.ndim)])
            m2 = np.sum((x - mean) ** 2, axis=axes)
            mean = mean.reshape(m2.shape)
            if result is None:
                count, result = n, (mean, m2)
            else:
                total = count + n
                delta = mean - result[0]
                result = (result[0] + delta * (n / total) if total else result[0],
                          result[1] + m2 + delta * delta * (count * n / total if total else 0.0))
                count = total
        else:
            raise ValueError(f"unknown reduction {kind!r}")
    if kind in ("mean", "var", "meanvar"):
        mean, m2 = result
        if count == 0:
            mean = np.zeros_like(m2)        # (the kernel's Welford state before any element)
        var = np.divide(m2, max(count - spec.ddof, 0.0))     # (as the kernel: 0/0 NaN, q/0 inf)
        if kind == "mean":
            return mean
        if kind == "var":
            return np.sqrt(var) if spec.root else var
        return np.stack([mean, var])
    return result
