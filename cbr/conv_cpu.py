"""conv2d on the CPU: im2col as a strided view, then one BLAS matmul per block of rows.

The window gather is a view (`as_strided` over a zero-padded copy), so the only Python loop is
over blocks of output rows, sized to keep the gathered columns in a few MiB: that bounds the
temporary memory for large batches and keeps the BLAS operand warm in cache.
float16 and bfloat16 inputs are computed in float32 (NumPy's float16 matmul has no BLAS and rounds
every partial sum); float64 stays float64. The result is cast back to x's dtype.
The backward (conv2d_backward_data_nhwc, conv2d_backward_filter_nhwc, below) runs one BLAS matmul
per window tap, in the same compute dtypes.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .conv_args import CheckedConv, as_pair, conv_output_shape, validate_conv_args

__all__ = ["conv2d_nhwc", "conv2d_backward_data_nhwc", "conv2d_backward_filter_nhwc", "conv_output_shape", "validate_conv_args", "as_pair", "CheckedConv"]

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


# ---- the backward: the adjoints of conv2d_nhwc in x (dgrad) and in w (wgrad) --------------------
# One BLAS matmul per window tap (r, s): tap (r, s) links output pixel (p, q) to input pixel
# (p*sh + r*dh - ph, q*sw + s*dw - pw), a strided slice of the zero-padded input. Per tap the
# temporaries are (N*P*Q, C) at most, never the R*S times larger im2col matrix.


def _checked_out(out, shape, dtype, name):
    if out is None:
        return np.empty(shape, dtype=dtype)
    if out.shape != tuple(shape) or out.dtype != dtype or not out.flags.c_contiguous:
        raise ValueError(
            f"out must be a C-contiguous {np.dtype(dtype)} array of shape {tuple(shape)} ({name}); "
            f"got {out.dtype} {out.shape}{'' if out.flags.c_contiguous else ' (not contiguous)'}"
        )
    return out


def _checked_dy(dy_shape, checked):
    if tuple(dy_shape) != checked.out_shape:
        raise ValueError(
            f"dy has shape {tuple(dy_shape)} but this convolution's output has shape {checked.out_shape} "
            f"(stride {checked.stride}, padding {checked.padding}, dilation {checked.dilation}); "
            "dy must be the gradient of that output"
        )


def _tap_slices(i, j, p, q, stride, dilation):
    """The rows and columns of the padded input that window tap (i, j) reads for all P x Q outputs."""
    (sh, sw), (dh, dw) = stride, dilation
    return (slice(i * dh, i * dh + sh * (p - 1) + 1, sh), slice(j * dw, j * dw + sw * (q - 1) + 1, sw))


def conv2d_backward_data_nhwc(dy, w, x_shape, stride=1, padding=0, dilation=1, out=None) -> np.ndarray:
    """dx = the gradient of sum(conv2d_nhwc(x, w) * dy) with respect to x, of shape x_shape (N, H, W, C):

    dx[n, h, v, c] = sum over (p, q, r, s, k) with h = p*sh + r*dh - ph and v = q*sw + s*dw - pw
                     of dy[n, p, q, k] * w[k, r, s, c].
    x_shape is needed, not implied: with a stride, several input sizes give the same output size.
    """
    dy = np.asarray(dy)
    w = np.asarray(w)
    checked = validate_conv_args(x_shape, w.shape, dy.dtype, w.dtype, stride, padding, dilation)
    _checked_dy(dy.shape, checked)
    n, h, wd, c = (int(d) for d in x_shape)
    k, r, s, _ = w.shape
    _, p, q, _ = checked.out_shape
    (ph, pw) = checked.padding
    out = _checked_out(out, (n, h, wd, c), dy.dtype, "dx")

    compute = compute_dtype_for(dy.dtype)
    padded = np.zeros((n, h + 2 * ph, wd + 2 * pw, c), dtype=compute)
    dy_rows = np.ascontiguousarray(dy, dtype=compute).reshape(-1, k)  # (N*P*Q, K)
    w_taps = np.ascontiguousarray(w.transpose(1, 2, 0, 3), dtype=compute)  # (R, S, K, C)
    tap = np.empty((n * p * q, c), dtype=compute)
    for i in range(r):
        for j in range(s):
            rows, cols = _tap_slices(i, j, p, q, checked.stride, checked.dilation)
            np.matmul(dy_rows, w_taps[i, j], out=tap)
            padded[:, rows, cols, :] += tap.reshape(n, p, q, c)
    out[...] = padded[:, ph : ph + h, pw : pw + wd, :]
    return out


def conv2d_backward_filter_nhwc(x, dy, w_shape, stride=1, padding=0, dilation=1, out=None) -> np.ndarray:
    """dw = the gradient of sum(conv2d_nhwc(x, w) * dy) with respect to w, of shape w_shape (K, R, S, C):

    dw[k, r, s, c] = sum over (n, p, q) of dy[n, p, q, k] * x[n, p*sh + r*dh - ph, q*sw + s*dw - pw, c]
    (zero outside x). Written in x's dtype, as the weights are.
    """
    x = np.asarray(x)
    dy = np.asarray(dy)
    checked = validate_conv_args(x.shape, w_shape, x.dtype, dy.dtype, stride, padding, dilation)
    _checked_dy(dy.shape, checked)
    n, h, wd, c = x.shape
    k, r, s, _ = (int(d) for d in w_shape)
    _, p, q, _ = checked.out_shape
    (ph, pw) = checked.padding
    out = _checked_out(out, (k, r, s, c), x.dtype, "dw")

    compute = compute_dtype_for(x.dtype)
    if ph or pw:
        padded = np.zeros((n, h + 2 * ph, wd + 2 * pw, c), dtype=compute)
        padded[:, ph : ph + h, pw : pw + wd, :] = x
    else:
        padded = np.asarray(x, dtype=compute)
    # (K, N*P*Q), contiguous: NumPy's matmul of a transposed view can miss BLAS (100x slower here)
    dy_cols = np.ascontiguousarray(np.asarray(dy, dtype=compute).reshape(-1, k).T)
    dw_taps = np.empty((r, s, k, c), dtype=compute)
    for i in range(r):
        for j in range(s):
            rows, cols = _tap_slices(i, j, p, q, checked.stride, checked.dilation)
            x_tap = padded[:, rows, cols, :].reshape(-1, c)  # (N*P*Q, C): a copy of this tap only
            np.matmul(dy_cols, x_tap, out=dw_taps[i, j])
    out[...] = dw_taps.transpose(2, 0, 1, 3)
    return out
