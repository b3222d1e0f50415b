"""2-D pooling over NHWC arrays with NumPy: strided windows (sliding_window_view), no copies of the
input but the padded one. Knows arrays only; the semantics are documented in lazytensor.ops.pooling."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def _windows(x, fill, kernel, stride, padding):
    """(N, P, Q, C, kh, kw) windows of x padded with `fill`."""
    (ph, pw), (sh, sw) = padding, stride
    padded = np.pad(x, ((0, 0), (ph, ph), (pw, pw), (0, 0)), constant_values=fill) if ph or pw else x
    return sliding_window_view(padded, kernel, axis=(1, 2))[:, ::sh, ::sw]


def pool_forward(kind: str, x, kernel, stride, padding, out) -> None:
    if kind == "max":
        np.max(_windows(x, -np.inf, kernel, stride, padding), axis=(-2, -1), out=out)
    else:       # the padding counts in the divisor (count_include_pad=True)
        total = _windows(x, 0, kernel, stride, padding).sum(axis=(-2, -1), dtype=np.float64)
        out[...] = total / (kernel[0] * kernel[1])


def _argmax(x, kernel, stride, padding, pq):
    """Per window, the position (r * kw + s) of its max, scanning rows first: the first maximum among
    the cells inside the input, or the last NaN where the window holds NaNs (PyTorch's rule)."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, h, w, c = x.shape
    p, q = pq
    win = _windows(x, -np.inf, kernel, stride, padding)
    flat = np.moveaxis(win.reshape(n, p, q, c, kh * kw), 4, 1)           # (N, K, P, Q, C)
    rows = np.arange(p)[:, None] * sh + np.arange(kh)[None, :] - ph       # (P, kh) input row of each cell
    cols = np.arange(q)[:, None] * sw + np.arange(kw)[None, :] - pw
    inside = (((rows >= 0) & (rows < h))[:, None, :, None] & ((cols >= 0) & (cols < w))[None, :, None, :])
    inside = inside.reshape(p, q, kh * kw).transpose(2, 0, 1)[None, :, :, :, None]    # (1, K, P, Q, 1)
    top = flat.max(axis=1, keepdims=True)
    first_max = np.argmax((flat == top) & inside, axis=1)
    nan = np.isnan(flat)
    last_nan = kh * kw - 1 - np.argmax(nan[:, ::-1], axis=1)
    return np.where(nan.any(axis=1), last_nan, first_max)                 # (N, P, Q, C)


def pool_backward(kind: str, x, g, kernel, stride, padding, out) -> None:
    """out = the gradient with respect to the pooled input x (of out's shape), given g, the gradient
    of the pooled output; x is needed (and read) for max pooling only."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, h, w, c = out.shape
    p, q = g.shape[1:3]
    grad = np.zeros((n, h + 2 * ph, w + 2 * pw, c), np.float64)
    which = _argmax(x, kernel, stride, padding, (p, q)) if kind == "max" else None
    share = g.astype(np.float64) / (kh * kw) if kind == "avg" else g.astype(np.float64)
    for r in range(kh):
        for s in range(kw):
            part = share if which is None else np.where(which == r * kw + s, share, 0.0)
            grad[:, r:r + sh * (p - 1) + 1:sh, s:s + sw * (q - 1) + 1:sw, :] += part
    out[...] = grad[:, ph:ph + h, pw:pw + w, :]
