"""Independent oracles for the new ops' tests: central finite differences in float64, and plain
loops for the 2-D poolings (PyTorch's semantics, written window by window)."""
from __future__ import annotations

import numpy as np


def finite_differences(f, arrays, which: int, eps: float = 1e-6) -> np.ndarray:
    """d f(*arrays) / d arrays[which], by central differences (f returns a float; arrays float64)."""
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    x = arrays[which]
    grad = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        keep = x[i]
        x[i] = keep + eps
        up = f(*arrays)
        x[i] = keep - eps
        down = f(*arrays)
        x[i] = keep
        grad[i] = (up - down) / (2 * eps)
    return grad


def _cells(shape, kernel, stride, padding, n, p, q):
    """The input cells (h, w) of window (p, q) that lie inside the input, rows first."""
    _, h, w, _ = shape
    for r in range(kernel[0]):
        for s in range(kernel[1]):
            hh, ww = p * stride[0] - padding[0] + r, q * stride[1] - padding[1] + s
            if 0 <= hh < h and 0 <= ww < w:
                yield hh, ww


def out_size(shape, kernel, stride, padding):
    _, h, w, _ = shape
    return (h + 2 * padding[0] - kernel[0]) // stride[0] + 1, (w + 2 * padding[1] - kernel[1]) // stride[1] + 1


def pool_reference(kind, x, kernel, stride, padding):
    """PyTorch's max_pool2d / avg_pool2d (count_include_pad=True) on NHWC x, in float64."""
    n_, _, _, c_ = x.shape
    p_, q_ = out_size(x.shape, kernel, stride, padding)
    y = np.zeros((n_, p_, q_, c_))
    for n in range(n_):
        for p in range(p_):
            for q in range(q_):
                cells = list(_cells(x.shape, kernel, stride, padding, n, p, q))
                for c in range(c_):
                    v = np.array([x[n, h, w, c] for h, w in cells], dtype=np.float64)
                    if kind == "max":
                        y[n, p, q, c] = np.nan if np.isnan(v).any() else v.max()
                    else:
                        y[n, p, q, c] = v.sum() / (kernel[0] * kernel[1])
    return y


def pool_backward_reference(kind, x, g, kernel, stride, padding):
    """The input gradient: PyTorch's argmax scan (val > max or isnan(val)) for max, even spread for avg."""
    n_, _, _, c_ = x.shape
    p_, q_ = out_size(x.shape, kernel, stride, padding)
    dx = np.zeros(x.shape)
    for n in range(n_):
        for p in range(p_):
            for q in range(q_):
                cells = list(_cells(x.shape, kernel, stride, padding, n, p, q))
                for c in range(c_):
                    if kind == "avg":
                        for h, w in cells:
                            dx[n, h, w, c] += g[n, p, q, c] / (kernel[0] * kernel[1])
                        continue
                    best, where = -np.inf, cells[0]
                    for h, w in cells:
                        v = x[n, h, w, c]
                        if v > best or np.isnan(v):
                            best, where = v, (h, w)
                    dx[n, where[0], where[1], c] += g[n, p, q, c]
    return dx
