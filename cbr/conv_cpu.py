"""conv2d on the CPU: im2col as a strided view, then one BLAS matmul per block of rows.

The window gather is a view (`as_strided` over a zero-padded copy), so the only Python loop is
over blocks of output rows, sized to keep the gathered columns in a few MiB: that bounds the
temporary memory for large batches and keeps the BLAS operand warm in cache.
float16 and bfloat16 inputs are computed in float32 (NumPy's float16 matmul has no BLAS and rounds
every partial sum); float64 stays float64. The result is cast back to x's dtype.
The data gradient (conv2d_backward_data_nhwc, below) runs one BLAS matmul per window tap; the filter
gradient one per block of im2col columns, as the forward; both in the same compute dtypes. Window
taps that read only padding for every output are skipped in all three.
"""

from __future__ import annotations

import functools

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
    windows, (i0, i1), (j0, j1) = _windows(x, r, s, (p, q), checked, compute)
    r, s = i1 - i0, j1 - j0
    # (R*S*C, K), in the same (r, s, c) order as the gathered columns: a transposed view (BLAS
    # reads it as it is; a transposing copy of a 512x3x3x512 filter costs more than the GEMM)
    w_cols = w[:, i0:i1, j0:j1, :].astype(compute, copy=False).reshape(k, r * s * c).T

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


def _windows(x, r, s, pq, checked, compute):
    """The (N, P, Q, R', S', C) im2col view of x in `compute` (zero padding around a copy) over the
    taps rows i0:i1, columns j0:j1 of the window: ((i0, i1), (j0, j1)) with it.

    Taps that read padding for every output are left out (a 3x3 conv over a 1x1 map reads its
    centre tap only): the GEMM's depth shrinks; the products it skips were of zeros of the padding.
    """
    (sh, sw), (ph, pw), (dh, dw) = checked.stride, checked.padding, checked.dilation
    (p, q), (n, h, wd, c) = pq, x.shape
    (i0, i1), (j0, j1) = (tap_range(r, h, p, sh, ph, dh), tap_range(s, wd, q, sw, pw, dw))
    top, left = ph - i0 * dh, pw - j0 * dw
    if i1 <= i0 or j1 <= j0 or top < 0 or left < 0:   # (no tap reads x, or a gap the crop cannot express)
        (i0, i1), (j0, j1), top, left = (0, r), (0, s), ph, pw
    bottom = max(0, (p - 1) * sh + (i1 - 1) * dh - ph - (h - 1))
    right = max(0, (q - 1) * sw + (j1 - 1) * dw - pw - (wd - 1))
    if top or left or bottom or right:
        padded = np.zeros((n, top + h + bottom, left + wd + right, c), dtype=compute)
        padded[:, top : top + h, left : left + wd, :] = x
    else:
        padded = np.ascontiguousarray(x, dtype=compute)
    # output pixel (p, q) reads rows p*sh + r*dh, columns q*sw + s*dw of the padded copy
    bn, bh, bw, bc = padded.strides
    windows = as_strided(padded, shape=(n, p, q, i1 - i0, j1 - j0, c),
                         strides=(bn, bh * sh, bw * sw, bh * dh, bw * dw, bc), writeable=False)
    return windows, (i0, i1), (j0, j1)


@functools.lru_cache(maxsize=1024)
def useful_taps(taps: int, size: int, out: int, stride: int, pad: int, dilation: int) -> tuple:
    """Per window tap along one axis, whether any of the `out` outputs reads a row of x with it
    (not padding): tap t reads rows o*stride + t*dilation - pad."""
    return tuple(any(0 <= o * stride + t * dilation - pad < size for o in range(out)) for t in range(taps))


def tap_range(taps, size, out, stride, pad, dilation) -> tuple:
    """(first, last + 1) of the useful taps along one axis; (0, 0) if none is."""
    useful = useful_taps(taps, size, out, stride, pad, dilation)
    if not any(useful):
        return 0, 0
    return useful.index(True), taps - useful[::-1].index(True)


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
# dgrad: one BLAS matmul per window tap (r, s): tap (r, s) links output pixel (p, q) to input pixel
# (p*sh + r*dh - ph, q*sw + s*dw - pw), a strided slice of the zero-padded input. Per tap the
# temporaries are (N*P*Q, C) at most, never the R*S times larger im2col matrix (an im2col form,
# one GEMM then R*S strided adds, measured no faster: the adds dominate).
# wgrad: the forward's im2col blocks, each one GEMM of depth N*P*Q (per tap, C = 3 at a network's
# input made 49 GEMMs 3 wide).


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


def _taps_reading_x(checked, hw, rs, pq):
    """The window taps (i, j) that read x (not only padding) for some output pixel."""
    (sh, sw), (ph, pw), (dh, dw) = checked.stride, checked.padding, checked.dilation
    rows = useful_taps(rs[0], hw[0], pq[0], sh, ph, dh)
    cols = useful_taps(rs[1], hw[1], pq[1], sw, pw, dw)
    return [(i, j) for i in range(rs[0]) if rows[i] for j in range(rs[1]) if cols[j]]


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
    w = w.astype(compute, copy=False)     # w[:, i, j, :], (K, C) with a row stride: BLAS reads it so
    tap = np.empty((n * p * q, c), dtype=compute)
    for i, j in _taps_reading_x(checked, (h, wd), (r, s), (p, q)):   # the others land in the padding
        rows, cols = _tap_slices(i, j, p, q, checked.stride, checked.dilation)
        np.matmul(dy_rows, w[:, i, j, :], out=tap)
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
    # dw (K, R'*S'*C) = dy^T (K, N*P*Q) @ the im2col columns (N*P*Q, R'*S'*C): one GEMM per block
    # of images, of depth N*P*Q, instead of one per tap of width C (C = 3 at a network's input)
    windows, (i0, i1), (j0, j1) = _windows(x, r, s, (p, q), checked, compute)
    rsc = (i1 - i0) * (j1 - j0) * c
    dy = np.asarray(dy, dtype=compute)
    dw = None
    for cols, dy_block in column_blocks(windows, dy):
        part = dy_block.reshape(-1, k).T @ cols.reshape(-1, rsc)   # (a transposed view: BLAS reads it)
        if dw is None:
            dw = part
        else:
            dw += part
    if (i0, i1, j0, j1) != (0, r, 0, s):
        out[...] = 0                                   # the taps that read padding only
    out[:, i0:i1, j0:j1, :] = dw.reshape(k, i1 - i0, j1 - j0, c)
    return out
