"""Planning the fused CBR backward, stage 1 (lazytensor.ops.cbr_backward): drelu + dBN as one
reduction kernel and one elementwise kernel, both lazytensor's own, on the CPU and on CUDA alike.

The ReLU mask is bit-packed over the output's NHWC-flattened elements, 8 to a byte, lowest bit
first. With K a multiple of 8 (every shape cuDNN takes), byte j holds the bits of elements 8j..8j+7,
which all lie in one row of channels, so the kernels run over the grid (N*P*Q, K/8, 8): the mask
is read as an (N*P*Q, K/8, 1) array broadcast over the last axis, and bit b of each byte is
`mask & bits[b]`. No index arithmetic beyond broadcasting, so the existing code generators (numba,
CUDA C) serve unchanged, and dY * mask exists only in registers. With K not a multiple of 8 the
plan first unpacks the mask to one byte per element (one small kernel, which explain says).

The per-channel sums run as ONE reduction over (N*P*Q, K/8, 8, 2): lane 0 sums dY', lane 1
dY' * x_hat, the two lanes of a channel reading the same dY, mask and conv output elements, so
memory is read once. Accumulation in float64, as the forward's statistics.
"""
from __future__ import annotations

import math

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import apply
from lazytensor.kernels.program import Reduction
from lazytensor.plan.cbr_plan import _contiguous
from lazytensor.plan.lower import lower
from lazytensor.plan.planner import HEAVY, ROOT_WRITERS, copy_step, may_overlap
from lazytensor.plan.steps import FusedElementwise, FusedReduction

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_U8 = np.dtype(np.uint8)


class _Grid:
    """The iteration space of the stage-1 kernels over an (..., K) activation and how each operand
    is read in it: NHWC arrays, per-channel vectors and the mask bits."""

    def __init__(self, backend, shape, device, mask, bits, steps, lanes=False):
        # lanes: one more axis of length 1 at the end, over which the sums' two lanes broadcast
        # (every operand is reshaped so; reshaping the expressions instead would copy their subtrees)
        self.device, self.tail = device, (1,) if lanes else ()
        self.m, self.k = math.prod(shape[:-1]), shape[-1]
        self.bit = None
        if mask is None:
            self.shape = (self.m, self.k)
        elif self.k % 8 == 0:
            self.shape = (self.m, self.k // 8, 8)
            byte = self.t(mask.reshape((self.m, self.k // 8, 1) + self.tail))
            self.bit = apply("not_equal", apply("bitwise_and", byte, self.t(bits.reshape((8,) + self.tail))), 0)
        else:
            self.shape = (self.m, self.k)
            self.bit = self._unpacked(backend, mask, bits, steps)

    def t(self, a):
        return _tensor.Tensor(a, self.device)

    def nhwc(self, a):
        """An (..., K) array as an operand over the grid."""
        return self.t(a.reshape(self.shape + self.tail))

    def channel(self, a):
        """A (K,) vector (or a strided column) as an operand over the grid."""
        return self.t(a.reshape(self.shape[1:] + self.tail))

    def _unpacked(self, backend, mask, bits, steps):
        nbytes = mask.shape[0]
        unpacked = backend.empty((nbytes, 8), _U8)
        bit = apply("not_equal", apply("bitwise_and", self.t(mask.reshape(nbytes, 1)), self.t(bits)), 0)
        program, inputs, scalars = lower(bit.astype(_U8), _U8)
        steps.append(FusedElementwise(backend, program, unpacked, inputs, scalars,
                                      note=f"ReLU mask unpacked to a byte per element: K = {self.k} is not a "
                                           "multiple of 8, so mask bytes straddle rows of channels"))
        flat = unpacked.reshape(nbytes * 8)[: self.m * self.k].reshape((self.m, self.k) + self.tail)
        return apply("not_equal", self.t(flat), 0)

    def masked(self, dy):
        """dY' = dY where the forward's ReLU passed, else 0 (where, not a product: an inf in dY
        behind a closed ReLU gives 0, as relu's own gradient)."""
        return dy if self.bit is None else apply("where", self.bit, dy, 0)


def _operands(node, backend, cut, steps):
    return [_contiguous(cut(a), backend, steps).data for a in node.args]


def _split(node, arrays):
    """(dy, conv_out, mean, inv_var, rest, mask, bits) of a stage-1 node's operands."""
    if node.attrs.relu:
        *head, mask, bits = arrays
    else:
        head, mask, bits = arrays, None, None
    return head[0], head[1], head[2], head[3], head[4:], mask, bits


def _result(node, backend, out, operands):
    """The plan's destination where the step may write it (dense, sharing no memory with what the
    step reads), else a temporary."""
    dense = (out is not None and out.flags.c_contiguous and not any(may_overlap(out, a) for a in operands))
    return out if dense else backend.empty(tuple(node.shape), node.dtype)


def _finish(node, backend, out, result, steps):
    if out is not None and result is not out:
        steps.append(copy_step(backend, result, out, "copy into the strided destination"))
    return steps, _tensor.Tensor(result, node.device)


def _compute_dtype(conv_out):
    return _F64 if conv_out.dtype == _F64 else _F32


def _x_hat(grid, conv_out, mean, inv_var, compute):
    return ((grid.nhwc(conv_out).astype(compute) - grid.channel(mean).astype(compute))
            * grid.channel(inv_var).astype(compute))


def _build_sums(node, backend, cut, out):
    steps: list = []
    arrays = _operands(node, backend, cut, steps)
    dy, conv_out, mean, inv_var, (lanes,), mask, bits = _split(node, arrays)
    grid = _Grid(backend, conv_out.shape, node.device, mask, bits, steps, lanes=True)
    compute = _compute_dtype(conv_out)
    dy_masked = grid.masked(grid.nhwc(dy).astype(compute))
    x_hat = _x_hat(grid, conv_out, mean, inv_var, compute)
    # lanes (..., 2): lane 0 dY', lane 1 dY' * x_hat; reduced over the rows in one kernel
    value = apply("where", grid.t(lanes), dy_masked * x_hat, dy_masked)
    spec = Reduction("sum", (0,), grid.shape + (2,), _F64, _F32)
    result = _result(node, backend, out, arrays)
    program, inputs, scalars = lower(value, compute)
    steps.append(FusedReduction(backend, program, spec, result.reshape(spec.out_shape), inputs, scalars,
                                note="dBN sums: per channel sum(dY') and sum(dY' * x_hat), dY' = dY * ReLU mask, "
                                     "in one read of dY, the mask bits and the conv output"))
    return _finish(node, backend, out, result, steps)


def _build_dx(node, backend, cut, out):
    steps: list = []
    arrays = _operands(node, backend, cut, steps)
    dy, conv_out, mean, inv_var, (gamma, sums), mask, bits = _split(node, arrays)
    grid = _Grid(backend, conv_out.shape, node.device, mask, bits, steps)
    compute = _compute_dtype(conv_out)
    dy_masked = grid.masked(grid.nhwc(dy).astype(compute))
    x_hat = _x_hat(grid, conv_out, mean, inv_var, compute)
    per_value = 1.0 / node.attrs.count
    dbeta, dgamma = (grid.channel(sums[:, j]).astype(compute) for j in (0, 1))
    scale = grid.channel(gamma).astype(compute) * grid.channel(inv_var).astype(compute)
    d_conv = scale * (dy_masked - dbeta * per_value - x_hat * (dgamma * per_value))
    result = _result(node, backend, out, arrays)
    program, inputs, scalars = lower(d_conv.astype(node.dtype), node.dtype)
    steps.append(FusedElementwise(backend, program, result.reshape(grid.shape), inputs, scalars,
                                  note="dBN: d(conv_out) from dY, the ReLU mask bits, the conv output and the "
                                       "dBN sums in one kernel"))
    return _finish(node, backend, out, result, steps)


def _build_drelu(node, backend, cut, out):
    steps: list = []
    arrays = _operands(node, backend, cut, steps)
    dy, mask, bits = arrays
    grid = _Grid(backend, dy.shape, node.device, mask, bits, steps)
    result = _result(node, backend, out, arrays)
    program, inputs, scalars = lower(grid.masked(grid.nhwc(dy)), node.dtype)
    steps.append(FusedElementwise(backend, program, result.reshape(grid.shape), inputs, scalars,
                                  note="d(skip) = dY * ReLU mask, reading the mask bits"))
    return _finish(node, backend, out, result, steps)


HEAVY["cbr_dbn_sums"] = _build_sums
HEAVY["cbr_dbn_dx"] = _build_dx
HEAVY["cbr_drelu"] = _build_drelu
ROOT_WRITERS.update(("cbr_dbn_sums", "cbr_dbn_dx", "cbr_drelu"))
