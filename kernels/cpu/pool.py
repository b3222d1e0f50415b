"""2-D pooling over NHWC arrays on the CPU: numba kernels that are the CUDA kernels' twins
(kernels/cuda/pool.py), written with the same index arithmetic, so that the CPU tests check the
algorithm both run. Forward: per output element, a scan of its window. Backward: per input element,
a gather over the windows that hold it (max pooling first finds each window's argmax with the
forward's scan, once per window; windows that do not overlap instead scatter each window's gradient
to its argmax).
Knows arrays only; the semantics are documented in lazytensor.ops.pooling.
numba has no float16 or bfloat16 arithmetic: their arrays are computed in float32 and rounded once."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from lazytensor.kernels.cpu.numba_cache import checked
from lazytensor.kernels.ops import BFLOAT16

_F16 = np.dtype(np.float16)
_HALVES = (_F16, BFLOAT16)


@njit(cache=True, inline="always")
def _window_argmax(x, n, p, q, c, kh, kw, sh, sw, ph, pw):
    """The argmax of window (n, p, q, c) as h * W + w: rows first, the first maximum, the last NaN."""
    h_in, w_in = x.shape[1], x.shape[2]
    h0, w0 = p * sh - ph, q * sw - pw
    best = -np.inf
    where = max(h0, 0) * w_in + max(w0, 0)
    for r in range(kh):
        h = h0 + r
        if h < 0 or h >= h_in:
            continue
        for s in range(kw):
            w = w0 + s
            if w < 0 or w >= w_in:
                continue
            v = x[n, h, w, c]
            if v > best or v != v:
                best = v
                where = h * w_in + w
    return where


@checked
@njit(parallel=True, cache=True, nogil=True)
def _forward(x, y, is_max, kh, kw, sh, sw, ph, pw):
    n_, h_in, w_in, c_ = x.shape
    p_, q_ = y.shape[1], y.shape[2]
    for np_ in prange(n_ * p_):
        n, p = np_ // p_, np_ % p_
        h0 = p * sh - ph
        for q in range(q_):
            w0 = q * sw - pw
            if is_max:
                # taps outside, channels inside: the channel loop runs over contiguous values (SIMD);
                # y is the accumulator (a max is exact in x's dtype), visited in the same tap order
                for c in range(c_):
                    y[n, p, q, c] = -np.inf
                for r in range(kh):
                    h = h0 + r
                    if h < 0 or h >= h_in:
                        continue
                    for s in range(kw):
                        w = w0 + s
                        if w < 0 or w >= w_in:
                            continue
                        for c in range(c_):
                            v = x[n, h, w, c]
                            if v > y[n, p, q, c] or v != v:
                                y[n, p, q, c] = v
                continue
            for c in range(c_):
                acc = 0.0
                for r in range(kh):
                    h = h0 + r
                    if h < 0 or h >= h_in:
                        continue
                    for s in range(kw):
                        w = w0 + s
                        if w < 0 or w >= w_in:
                            continue
                        acc += np.float64(x[n, h, w, c])
                y[n, p, q, c] = acc / (kh * kw)


@checked
@njit(parallel=True, cache=True, nogil=True)
def _backward(x, g, dx, is_max, kh, kw, sh, sw, ph, pw):
    n_, h_in, w_in, c_ = dx.shape
    p_, q_ = g.shape[1], g.shape[2]
    if is_max and sh >= kh and sw >= kw:
        # windows that do not overlap: each input element is in one window at most, so each window
        # writes its gradient to its argmax (found once, not once per element it holds) over zeros
        for nh in prange(n_ * h_in):
            n, h = nh // h_in, nh % h_in
            for w in range(w_in):
                for c in range(c_):
                    dx[n, h, w, c] = 0.0
        for np_ in prange(n_ * p_):
            n, p = np_ // p_, np_ % p_
            h0 = p * sh - ph
            best = np.empty(c_, np.float64)
            where = np.empty(c_, np.int64)
            for q in range(q_):
                w0 = q * sw - pw
                # _window_argmax's scan for all channels at once: taps outside, channels inside
                best[:] = -np.inf
                where[:] = max(h0, 0) * w_in + max(w0, 0)
                for r in range(kh):
                    h = h0 + r
                    if h < 0 or h >= h_in:
                        continue
                    for s in range(kw):
                        w = w0 + s
                        if w < 0 or w >= w_in:
                            continue
                        for c in range(c_):
                            v = np.float64(x[n, h, w, c])
                            if v > best[c] or v != v:
                                best[c] = v
                                where[c] = h * w_in + w
                for c in range(c_):
                    h, w = where[c] // w_in, where[c] % w_in
                    if h0 <= h < h0 + kh and w0 <= w < w0 + kw:
                        dx[n, h, w, c] = np.float64(g[n, p, q, c]) + 0.0     # (+0.0: the gather's -0.0 rule)
        return
    # overlapping windows: each window's argmax found once, into a table the gather then reads
    arg = np.empty((n_, p_, q_, c_) if is_max else (0, 0, 0, 0), np.int64)
    if is_max:
        for np_ in prange(n_ * p_):
            n, p = np_ // p_, np_ % p_
            for q in range(q_):
                for c in range(c_):
                    arg[n, p, q, c] = _window_argmax(x, n, p, q, c, kh, kw, sh, sw, ph, pw)
    for nh in prange(n_ * h_in):
        n, h = nh // h_in, nh % h_in
        hp = h + ph                 # in padded coordinates: window p holds rows p*sh .. p*sh+kh-1
        p_lo = 0 if hp < kh else (hp - kh) // sh + 1
        p_hi = min(hp // sh, p_ - 1)
        acc = np.empty(c_, np.float64)
        for w in range(w_in):
            wp = w + pw
            q_lo = 0 if wp < kw else (wp - kw) // sw + 1
            q_hi = min(wp // sw, q_ - 1)
            # windows outside, channels inside (contiguous: SIMD); each element's windows in the
            # same ascending (p, q) order. Adding +0.0 where a window's max is elsewhere changes
            # no sum: an accumulator that starts at +0.0 is never -0.0.
            acc[:] = 0.0
            for p in range(p_lo, p_hi + 1):
                for q in range(q_lo, q_hi + 1):
                    for c in range(c_):
                        if not is_max or arg[n, p, q, c] == h * w_in + w:
                            acc[c] += np.float64(g[n, p, q, c])
                        else:
                            acc[c] += 0.0
            for c in range(c_):
                dx[n, h, w, c] = acc[c] if is_max else acc[c] / (kh * kw)


def _computable(a):
    return a.astype(np.float32) if a.dtype in _HALVES else a


def _into(out, run):
    """run(target) into out, through a float32 twin where out is float16 or bfloat16."""
    if out.dtype not in _HALVES:
        run(out)
        return
    tmp = np.empty(out.shape, np.float32)
    run(tmp)
    out[...] = tmp


def pool_forward(kind: str, x, kernel, stride, padding, out) -> None:
    x = _computable(x)
    _into(out, lambda y: _forward(x, y, kind == "max", *kernel, *stride, *padding))


def pool_backward(kind: str, x, g, kernel, stride, padding, out) -> None:
    """out = the gradient with respect to the pooled input x, given g, the gradient of the pooled
    output; x is read for max pooling only (None for avg)."""
    g = _computable(g)
    x = g if x is None else _computable(x)
    _into(out, lambda dx: _backward(x, g, dx, kind == "max", *kernel, *stride, *padding))
