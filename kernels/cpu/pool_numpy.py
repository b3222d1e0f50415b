"""2-D pooling over NHWC arrays in NumPy: the interpreter tier's twin of kernels/cpu/pool.py, bit for
bit. Each window tap is one strided view of the padded input, visited in the kernels' order, so each
element's float64 accumulator sees the same values in the same order: forward, the taps of its
window in row-major order; backward, the windows that hold it by ascending (p, q), which for one
input element is the taps in descending (r, s). Padding reads -inf (max) or +0.0 (avg), which leave
the accumulators as the kernels' skips do (an avg accumulator starts at +0.0 and never becomes -0.0).
"""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.ops import BFLOAT16

_HALVES = (np.dtype(np.float16), BFLOAT16)


def _computable(a):
    return a.astype(np.float32) if a.dtype in _HALVES else a


def _padded(x, ph, pw, h_need, w_need, fill):
    n, h, w, c = x.shape
    out = np.full((n, max(h + 2 * ph, h_need), max(w + 2 * pw, w_need), c), fill, x.dtype)
    out[:, ph:ph + h, pw:pw + w, :] = x
    return out


def _tap(a, r, s, sh, sw, p_, q_):
    """The view of `a` (padded) that tap (r, s) of every window (p, q) reads."""
    return a[:, r:r + sh * (p_ - 1) + 1:sh, s:s + sw * (q_ - 1) + 1:sw, :]


def _window_argmax(x, kh, kw, sh, sw, ph, pw, p_, q_):
    """Per window (n, p, q, c), the tap (r, s) of its argmax: rows first, the first maximum, the
    last NaN; where no value beats -inf, the window's first in-bounds element (the kernels' rule)."""
    xp = _padded(x, ph, pw, sh * (p_ - 1) + kh, sw * (q_ - 1) + kw, -np.inf)
    shape = (x.shape[0], p_, q_, x.shape[3])
    best = np.full(shape, -np.inf, x.dtype)
    r0 = np.maximum(ph - sh * np.arange(p_), 0).reshape(1, p_, 1, 1)
    s0 = np.maximum(pw - sw * np.arange(q_), 0).reshape(1, 1, q_, 1)
    arg_r = np.broadcast_to(r0, shape).copy()
    arg_s = np.broadcast_to(s0, shape).copy()
    for r in range(kh):
        for s in range(kw):
            v = _tap(xp, r, s, sh, sw, p_, q_)
            take = (v > best) | (v != v)
            np.copyto(best, v, where=take)
            arg_r[take] = r
            arg_s[take] = s
    return arg_r, arg_s


def _forward(x, y, is_max, kh, kw, sh, sw, ph, pw):
    p_, q_ = y.shape[1], y.shape[2]
    xp = _padded(x, ph, pw, sh * (p_ - 1) + kh, sw * (q_ - 1) + kw, -np.inf if is_max else 0)
    acc = np.full(y.shape, -np.inf if is_max else 0.0, np.float64)
    for r in range(kh):
        for s in range(kw):
            v = _tap(xp, r, s, sh, sw, p_, q_).astype(np.float64)
            if is_max:
                np.copyto(acc, v, where=(v > acc) | (v != v))
            else:
                acc += v
    y[...] = acc if is_max else acc / (kh * kw)


def _backward(x, g, dx, is_max, kh, kw, sh, sw, ph, pw):
    n_, h_in, w_in, c_ = dx.shape
    p_, q_ = g.shape[1], g.shape[2]
    h_pad, w_pad = max(h_in + 2 * ph, sh * (p_ - 1) + kh), max(w_in + 2 * pw, sw * (q_ - 1) + kw)
    acc = np.zeros((n_, h_pad, w_pad, c_), np.float64)
    g64 = g.astype(np.float64)
    if is_max:
        arg_r, arg_s = _window_argmax(x, kh, kw, sh, sw, ph, pw, p_, q_)
    for r in range(kh - 1, -1, -1):          # windows by ascending p: taps by descending r
        for s in range(kw - 1, -1, -1):
            into = _tap(acc, r, s, sh, sw, p_, q_)
            if is_max:
                into += np.where((arg_r == r) & (arg_s == s), g64, 0.0)
            else:
                into += g64
    inner = acc[:, ph:ph + h_in, pw:pw + w_in, :]
    dx[...] = inner if is_max else inner / (kh * kw)


def _into(out, run):
    """run(target) into out, through a float32 twin where out is float16 or bfloat16 (pool.py's)."""
    if out.dtype not in _HALVES:
        run(out)
        return
    tmp = np.empty(out.shape, np.float32)
    run(tmp)
    out[...] = tmp


def pool_forward(kind: str, x, kernel, stride, padding, out) -> None:
    x = _computable(x)
    with np.errstate(all="ignore"):
        _into(out, lambda y: _forward(x, y, kind == "max", *kernel, *stride, *padding))


def pool_backward(kind: str, x, g, kernel, stride, padding, out) -> None:
    """pool.py's pool_backward: x is read for max pooling only (None for avg)."""
    g = _computable(g)
    x = g if x is None else _computable(x)
    with np.errstate(all="ignore"):
        _into(out, lambda dx: _backward(x, g, dx, kind == "max", *kernel, *stride, *padding))
