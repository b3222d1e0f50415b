"""conv2d on the CPU: im2col as a strided view, then one BLAS matmul per block of rows.

The window gather is a view (`as_strided` over a zero-padded copy), so the only Python loop is
over blocks of output rows, sized to keep the gathered columns in a few MiB: that bounds the
temporary memory for large batches and keeps the BLAS operand warm in cache.
float16 inputs are computed in float32 (NumPy's float16 matmul has no BLAS and rounds every
partial sum); float64 stays float64. The result is cast back to x's dtype.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .conv_args import CheckedConv, as_pair, conv_output_shape, validate_conv_args

__all__ = ["conv2d_nhwc", "conv_output_shape", "validate_conv_args", "as_pair", "CheckedConv"]

# Target size of one block of gathered columns (rows x R*S*C values).
COLUMN_BLOCK_BYTES = 8 << 20


def compute_dtype_for(dtype) -> np.dtype:
    """The dtype the matmul runs in: float64 for float64 inputs, float32 otherwise."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def conv2d_nhwc(x: np.ndarray, w: np.ndarray, stride=1, padding=0, dilation=1, out: np.ndarray | None = None) -> np.ndarray:
    """y[n, p, q, k] = sum over r, s, c of x[n, p*sh + r*dh - ph, q*sw + s*dw - pw, c] * w[k, r, s, c].

    x: (N, H, W, C), w: (K, R, S, C), stride/padding/dilation: int or (h, w).
    out: optional (N, P, Q, K) array of x's dtype to write into; it is returned.
    """
    x = np.asarray(x)
    w = np.asarray(w)
    checked = validate_conv_args(x.shape, w.shape, x.dtype, w.dtype, stride, padding, dilation)
    (sh, sw), (ph, pw), (dh, dw) = checked.stride, checked.padding, checked.dilation
    n, p, q, k = checked.out_shape
    _, h, wd, c = x.shape
    _, r, s, _ = w.shape

    if out is None:
        out = np.empty((n, p, q, k), dtype=x.dtype)
    elif out.shape != (n, p, q, k) or out.dtype != x.dtype or not out.flags.c_contiguous:
        raise ValueError(
            f"out must be a C-contiguous {x.dtype} array of shape {(n, p, q, k)}; "
            f"got {out.dtype} {out.shape}{'' if out.flags.c_contiguous else ' (not contiguous)'}"
        )

    compute = compute_dtype_for(x.dtype)
    if ph or pw:
        padded = np.zeros((n, h + 2 * ph, wd + 2 * pw, c), dtype=compute)
        padded[:, ph : ph + h, pw : pw + wd, :] = x
    else:
        padded = np.ascontiguousarray(x, dtype=compute)

    # (N, P, Q, R, S, C) view: output pixel (p, q) reads rows p*sh + r*dh, columns q*sw + s*dw.
    bn, bh, bw, bc = padded.strides
    windows = as_strided(
        padded,
        shape=(n, p, q, r, s, c),
        strides=(bn, bh * sh, bw * sw, bh * dh, bw * dw, bc),
        writeable=False,
    )
    # (R*S*C, K), in the same (r, s, c) order as the gathered columns.
    w_cols = np.ascontiguousarray(w.reshape(k, r * s * c).T, dtype=compute)

    rsc = r * s * c
    direct = out.dtype == compute
    for cols, target in column_blocks(windows, out):
        flat_cols = cols.reshape(-1, rsc)  # the im2col copy of this block only
        flat_target = target.reshape(-1, k)  # a view: out is C-contiguous
        if direct:
            np.matmul(flat_cols, w_cols, out=flat_target)
        else:
            flat_target[...] = flat_cols @ w_cols
    return out


def column_blocks(windows: np.ndarray, out: np.ndarray):
    """Pairs (window view, output view) covering the output in blocks of about COLUMN_BLOCK_BYTES.

    Whole images when one fits (the common case: few large matmuls), else runs of output rows of
    one image. A block never spans two images along a partial row range, so each window view
    reshapes to columns by copying just that block.
    """
    n, p, q, r, s, c = windows.shape
    row_bytes = q * r * s * c * windows.itemsize
    rows_per_block = max(1, COLUMN_BLOCK_BYTES // row_bytes)
    images_per_block = rows_per_block // p
    if images_per_block >= 1:
        for n0 in range(0, n, images_per_block):
            n1 = min(n, n0 + images_per_block)
            yield windows[n0:n1], out[n0:n1]
    else:
        for i in range(n):
            for p0 in range(0, p, rows_per_block):
                p1 = min(p, p0 + rows_per_block)
                yield windows[i, p0:p1], out[i, p0:p1]
