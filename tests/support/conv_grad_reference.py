"""float64 oracles for the conv and batch-norm gradients, written from the definitions.

They share no code with lazytensor beyond the argument checks: the backward convolutions loop over
the window taps and scatter with index arrays (the CPU path uses strided slices and BLAS), and the
batch-norm forward is NumPy's mean and var, for central finite differences.
"""
from __future__ import annotations

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from lazytensor.cbr.conv_args import conv_output_shape, validate_conv_args


def _tap_indices(i, j, checked, h, wd, p, q):
    """Input rows and columns read by window tap (i, j) for the output rows and columns that land in x."""
    (sh, sw), (ph, pw), (dh, dw) = checked.stride, checked.padding, checked.dilation
    rows = np.arange(p) * sh + i * dh - ph
    cols = np.arange(q) * sw + j * dw - pw
    ok_r, ok_c = (rows >= 0) & (rows < h), (cols >= 0) & (cols < wd)
    return rows[ok_r], cols[ok_c], ok_r, ok_c


def dgrad_reference(dy, w, x_shape, stride, padding, dilation):
    """dx[n, h, v, c] = sum of dy[n, p, q, k] * w[k, r, s, c] over h = p*sh + r*dh - ph, v = q*sw + s*dw - pw."""
    checked = validate_conv_args(x_shape, w.shape, np.float64, np.float64, stride, padding, dilation)
    dy, w = np.asarray(dy, np.float64), np.asarray(w, np.float64)
    n, h, wd, c = x_shape
    _, p, q, _ = checked.out_shape
    dx = np.zeros(x_shape)
    for i in range(w.shape[1]):
        for j in range(w.shape[2]):
            rows, cols, ok_r, ok_c = _tap_indices(i, j, checked, h, wd, p, q)
            part = np.einsum("npqk,kc->npqc", dy[:, ok_r][:, :, ok_c], w[:, i, j, :])
            dx[:, rows[:, None], cols[None, :], :] += part   # distinct (row, col) pairs within one tap
    return dx


def wgrad_reference(x, dy, w_shape, stride, padding, dilation):
    """dw[k, r, s, c] = sum over n, p, q of dy[n, p, q, k] * x[n, p*sh + r*dh - ph, q*sw + s*dw - pw, c]."""
    checked = validate_conv_args(x.shape, w_shape, np.float64, np.float64, stride, padding, dilation)
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    _, h, wd, _ = x.shape
    _, p, q, _ = checked.out_shape
    dw = np.zeros(w_shape)
    for i in range(w_shape[1]):
        for j in range(w_shape[2]):
            rows, cols, ok_r, ok_c = _tap_indices(i, j, checked, h, wd, p, q)
            taps = x[:, rows[:, None], cols[None, :], :]
            dw[:, i, j, :] = np.einsum("npqk,npqc->kc", dy[:, ok_r][:, :, ok_c], taps)
    return dw


def batch_norm_reference(x, gamma, beta, running_mean, running_var, training, eps):
    """The batch-norm forward in float64 (biased batch variance in training)."""
    axes = tuple(range(x.ndim - 1))
    if training:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
    else:
        mean, var = np.asarray(running_mean, np.float64), np.asarray(running_var, np.float64)
    return (x - mean) / np.sqrt(var + eps) * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)


def central_differences(f, a, h=1e-6):
    """The gradient of the scalar function f at the float64 array a, one element at a time."""
    a = np.array(a, dtype=np.float64)
    grad = np.empty_like(a)
    flat, out = a.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + h
        up = f(a)
        flat[i] = keep - h
        down = f(a)
        flat[i] = keep
        out[i] = (up - down) / (2 * h)
    return grad


@st.composite
def conv_cases(draw, max_hw=9, max_c=5):
    """(x shape, w shape, stride, padding, dilation, seed), odd shapes and uneven (h, w) pairs included."""
    pairs = st.tuples
    n = draw(st.integers(1, 3))
    h, w = draw(st.integers(1, max_hw)), draw(st.integers(1, max_hw))
    c, k = draw(st.integers(1, max_c)), draw(st.integers(1, max_c))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = draw(st.one_of(st.integers(1, 3), pairs(st.integers(1, 3), st.integers(1, 3))))
    padding = draw(st.one_of(st.integers(0, 2), pairs(st.integers(0, 2), st.integers(0, 2))))
    dilation = draw(st.one_of(st.integers(1, 2), pairs(st.integers(1, 3), st.integers(1, 3))))
    _, p, q, _ = conv_output_shape((n, h, w, c), (k, r, s, c), stride, padding, dilation)
    assume(p > 0 and q > 0)
    return (n, h, w, c), (k, r, s, c), stride, padding, dilation, draw(st.integers(0, 2**32 - 1))
