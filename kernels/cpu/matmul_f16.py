"""float16 matmul on the CPU with NumPy's numbers, fast.

Design: docs/design/kernels.md, section "kernels/cpu/matmul_f16.py".
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from lazytensor.kernels.cpu.numba_cache import checked

_ROWS = 8       # rows of `a` per block: one read of a row of `b` serves 8 output rows


@checked
@njit(parallel=True, cache=True, nogil=True)
def _sum_in_order(a, b, out):
    """out[i, j] = sum over k, in order, of a[i, k] * b[k, j]; a, b, out float32, 2-D, out C-contiguous."""
    n, depth = a.shape
    m = b.shape[1]
    for block in prange((n + _ROWS - 1) // _ROWS):
        i0 = block * _ROWS
        rows = min(_ROWS, n - i0)
        acc = np.zeros((_ROWS, m), np.float32)
        for k in range(depth):
            for r in range(rows):
                x = a[i0 + r, k]
                for j in range(m):
                    acc[r, j] += x * b[k, j]
        for r in range(rows):
            for j in range(m):
                out[i0 + r, j] = acc[r, j]


def matmul_f16(a, b, out) -> None:
    """out[...] = a @ b for float16 a, b and out with np.matmul's semantics (1-D operands, broadcast
    batch axes) and its float16 numbers."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    # Converted once each (rows walked in order), then broadcast as views: a batch that broadcasts
    # an operand does not copy it.
    a32 = np.broadcast_to(a2.astype(np.float32, order="C"), batch + a2.shape[-2:])
    b32 = np.broadcast_to(b2.astype(np.float32, order="C"), batch + b2.shape[-2:])
    result = np.empty(batch + (a2.shape[-2], b2.shape[-1]), np.float32)
    for index in np.ndindex(batch):
        _sum_in_order(a32[index], b32[index], result[index])
    out[...] = result.reshape(out.shape)      # float32 -> float16: round to nearest even, as NumPy's loop
