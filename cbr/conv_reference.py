"""The discrete convolution in float64, written as its definition: one term per window tap.

An oracle for every conv path (CPU im2col, cuDNN graphs): it shares no code with them beyond the
argument checks, loops over the R x S taps, and vectorises over N, P, Q and the channel sums.
"""

from __future__ import annotations

import numpy as np

from .conv_args import validate_conv_args


def conv2d_nhwc_reference(x: np.ndarray, w: np.ndarray, stride=1, padding=0, dilation=1) -> np.ndarray:
    """float64 y[n, p, q, k] = sum_{r, s, c} x[n, p*sh + r*dh - ph, q*sw + s*dw - pw, c] * w[k, r, s, c]."""
    x = np.asarray(x)
    w = np.asarray(w)
    checked = validate_conv_args(x.shape, w.shape, x.dtype, w.dtype, stride, padding, dilation)
    (sh, sw), (ph, pw), (dh, dw) = checked.stride, checked.padding, checked.dilation
    n, p, q, k = checked.out_shape
    _, r, s, _ = w.shape

    x64 = np.pad(x.astype(np.float64), ((0, 0), (ph, ph), (pw, pw), (0, 0)))
    w64 = w.astype(np.float64)
    y = np.zeros((n, p, q, k), dtype=np.float64)
    for i in range(r):
        for j in range(s):
            rows = x64[:, i * dh : i * dh + sh * (p - 1) + 1 : sh]
            tap = rows[:, :, j * dw : j * dw + sw * (q - 1) + 1 : sw, :]  # (N, P, Q, C)
            y += np.einsum("npqc,kc->npqk", tap, w64[:, i, j, :])
    return y
