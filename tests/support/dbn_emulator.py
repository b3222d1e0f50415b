"""A NumPy model of the vectorized dBN kernels (kernels/cuda/dbn.py), thread by thread in
their index arithmetic: which rows each (block, thread) visits, which mask byte and bit a channel
reads, where a block's shared sums and partials land, and the d(conv_out) coefficients. Same
signatures as cuda_dbn's launchers (without the compiler), so a plan's steps run on it on the host.
Arrays are read as the kernels read memory: flat, vectors of 8 channels (8 halves, or 8 floats)."""
from __future__ import annotations

import numpy as np


def _bits(mask, e):
    """(len(e), 8) bools: bit j of mask byte e, as `(m >> j) & 1`."""
    m = mask.reshape(-1)[e].astype(np.uint32)
    return ((m[:, None] >> np.arange(8, dtype=np.uint32)) & 1) == 1


def _rows_of(geometry, grid, bx, ty, reverse=False):
    """The rows thread row ty of row block bx visits: r = bx * TY + ty, stepping gridDim.x * TY
    (lt_dbn_dx: rows - 1 - that)."""
    tx_n, ty_n, _ = geometry.block
    stride = grid[0] * ty_n
    i = np.arange(bx * ty_n + ty, geometry.rows, stride, dtype=np.int64)
    return geometry.rows - 1 - i if reverse else i


def emulate_sums(geometry, dy, x, mask, mean, inv_var, partial, sums, skip=None):
    """skip: d(skip) = dY' written by each thread for the vectors it reads (as lt_dbn_drelu would)."""
    tx_n, ty_n, _ = geometry.block
    written = np.zeros(geometry.rows * geometry.V, np.int64)
    v_n, k = geometry.V, 8 * geometry.V
    dy16, x16 = dy.reshape(-1, 8), x.reshape(-1, 8)
    part = partial.reshape(-1)
    for bx in range(geometry.sums_grid[0]):
        for by in range(geometry.sums_grid[1]):
            red = np.zeros(16 * ty_n * tx_n, np.float32)
            for ty in range(ty_n):
                rows = _rows_of(geometry, geometry.sums_grid, bx, ty)
                for tx in range(tx_n):
                    v = by * tx_n + tx
                    s0 = s1 = np.zeros(8, np.float32)
                    if v < v_n:
                        e = rows * v_n + v
                        if skip is not None:
                            _select(dy, mask, skip, e)
                            written[e] += 1
                        g = dy16[e].astype(np.float32)
                        if mask is not None:
                            g = np.where(_bits(mask, e), g, np.float32(0))
                        mu = mean[v * 8: v * 8 + 8].astype(np.float32)
                        s0 = g.sum(axis=0, dtype=np.float32)
                        s1 = (g * (x16[e].astype(np.float32) - mu)).sum(axis=0, dtype=np.float32)
                    for j in range(8):
                        red[(j * ty_n + ty) * tx_n + tx] = s0[j]
                        red[((8 + j) * ty_n + ty) * tx_n + tx] = s1[j]
            for o in range(16 * tx_n):
                q, col = divmod(o, tx_n)
                s = np.float32(sum(red[(q * ty_n + y) * tx_n + col] for y in range(ty_n)))
                vv = by * tx_n + col
                if vv < v_n:
                    part[(bx * 2 + (q >> 3)) * k + vv * 8 + (q & 7)] = s
    if skip is not None:
        assert (written == 1).all(), "lt_dbn_sums must write every vector of d(skip) exactly once"
    flat = sums.reshape(-1)
    for q in range(2 * k):
        acc = sum(float(part[b * 2 * k + q]) for b in range(geometry.partial_rows))
        lane, ch = divmod(q, k)
        if lane == 1:
            acc *= float(inv_var[ch])
        flat[ch * 2 + lane] = np.float32(acc)


def emulate_dx(geometry, dy, x, mask, mean, inv_var, gamma, sums, out, count):
    tx_n, ty_n, _ = geometry.block
    v_n = geometry.V
    dy16, x16, out16 = dy.reshape(-1, 8), x.reshape(-1, 8), out.reshape(-1, 8)
    per_value = np.float32(1.0 / count)
    s = sums.reshape(-1)
    seen = np.zeros(geometry.rows * v_n, np.int64)
    for bx in range(geometry.dx_grid[0]):
        for by in range(geometry.dx_grid[1]):
            for ty in range(ty_n):
                rows = _rows_of(geometry, geometry.dx_grid, bx, ty, reverse=True)
                for tx in range(tx_n):
                    v = by * tx_n + tx
                    if v >= v_n:
                        continue
                    ch = v * 8 + np.arange(8)
                    iv = inv_var[ch].astype(np.float32)
                    a = gamma[ch].astype(np.float32) * iv
                    b = -(a * (s[2 * ch] * per_value))
                    c = -((a * iv) * (s[2 * ch + 1] * per_value))
                    e = rows * v_n + v
                    np.add.at(seen, e, 1)
                    g = dy16[e].astype(np.float32)
                    if mask is not None:
                        g = np.where(_bits(mask, e), g, np.float32(0))
                    d = c * (x16[e].astype(np.float32) - mean[ch].astype(np.float32)) + (a * g + b)
                    out16[e] = d.astype(out.dtype)
    assert (seen == 1).all(), "lt_dbn_dx must write every vector exactly once"


def emulate_drelu(geometry, dy, mask, out):
    """Thread t of the 1-D grid visits vectors t, t + stride, ...: each vector once."""
    _select(dy, mask, out, np.arange(geometry.rows * geometry.V, dtype=np.int64))


def _select(dy, mask, out, e):
    """lt_select8 over vectors e: each value of dY kept where its mask bit is set, else +0."""
    if dy.dtype == np.float32:      # a word per float: bit j keeps word j
        words_in, words_out = (a.reshape(-1).view(np.uint32).reshape(-1, 8) for a in (dy, out))
        m = mask.reshape(-1)[e].astype(np.uint32)
        keep = ((m[:, None] >> np.arange(8, dtype=np.uint32)) & 1).astype(bool)
        words_out[e] = np.where(keep, words_in[e], np.uint32(0))
        return
    words_in = dy.reshape(-1).view(np.uint32).reshape(-1, 4)
    words_out = out.reshape(-1).view(np.uint32).reshape(-1, 4)
    m = mask.reshape(-1)[e].astype(np.uint32)
    w = words_in[e].copy()
    for i in range(4):      # halves 2i (low 16 bits) and 2i + 1 (high) of word i
        lo = np.where((m >> (2 * i)) & 1, np.uint32(0x0000FFFF), np.uint32(0))
        hi = np.where((m >> (2 * i + 1)) & 1, np.uint32(0xFFFF0000), np.uint32(0))
        w[:, i] &= lo | hi
    words_out[e] = w
