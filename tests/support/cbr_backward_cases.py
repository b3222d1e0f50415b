"""Shared by the fused CBR backward tests (CPU and GPU): drawn cases, the forward, and the
unfused reference (the gradient rules of rules_conv_bn called directly)."""
from __future__ import annotations

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

import lazytensor as lt
from lazytensor.autodiff.rules import GRADIENTS
from lazytensor.autodiff.origin import as_computed
from lazytensor.cbr.conv_args import conv_output_shape

FORMS = ("relu", "residual", "bn")


@st.composite
def cbr_cases(draw, max_hw=6, max_c=3, ks=(1, 3, 5, 8, 16)):
    """(x shape, w shape, stride, padding, dilation, form, seed); K both a multiple of 8 (the mask read
    as bytes over channel groups) and not (the mask unpacked first)."""
    pairs = st.tuples
    n = draw(st.integers(1, 3))
    h, w = draw(st.integers(1, max_hw)), draw(st.integers(1, max_hw))
    c, k = draw(st.integers(1, max_c)), draw(st.sampled_from(ks))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = draw(st.one_of(st.integers(1, 2), pairs(st.integers(1, 3), st.integers(1, 3))))
    padding = draw(st.one_of(st.integers(0, 2), pairs(st.integers(0, 2), st.integers(0, 2))))
    dilation = draw(st.one_of(st.integers(1, 2), pairs(st.integers(1, 2), st.integers(1, 2))))
    out = conv_output_shape((n, h, w, c), (k, r, s, c), stride, padding, dilation)
    assume(out[1] > 0 and out[2] > 0 and out[0] * out[1] * out[2] >= 2)
    form = draw(st.sampled_from(FORMS))
    return (n, h, w, c), (k, r, s, c), stride, padding, dilation, form, draw(st.integers(0, 2**32 - 1))


class Forward:
    """relu(batch_norm(conv2d(x, w)) [+ skip]) (or batch_norm(conv2d(x, w))), evaluated in training."""

    def __init__(self, x, w, gamma, beta, skip, form, kw, eps=1e-5, device="cpu", evaluate=True):
        self.form, self.kw, self.eps = form, kw, eps
        t = lambda a: lt.asarray(a, device=device)      # noqa: E731
        self.x, self.w, self.gamma, self.beta = t(x), t(w), t(gamma), t(beta)
        self.skip = t(skip) if form == "residual" else None
        k = w.shape[0]
        self.running = t(np.zeros(k, np.float32)), t(np.ones(k, np.float32))
        self.saved = lt.BatchNormSaved()
        self.conv = lt.conv2d(self.x, self.w, **kw)
        self.bn = lt.batch_norm(self.conv, self.gamma, self.beta, *self.running, eps=eps, saved=self.saved)
        self.root = {"relu": lambda: lt.relu(self.bn), "bn": lambda: self.bn,
                     "residual": lambda: lt.relu(self.bn + self.skip)}[form]()
        self.y = lt.evaluate(self.root).numpy() if evaluate else None

    def operands(self):
        ops = {"x": self.x, "w": self.w, "gamma": self.gamma, "beta": self.beta}
        if self.skip is not None:
            ops["skip"] = self.skip
        return ops


def unfused_gradients(f: Forward, dy: np.ndarray) -> dict:
    """The reference: drelu from the evaluated output, then the batch_norm and conv2d rules."""
    g = np.where(f.y > 0, dy, 0).astype(dy.dtype) if f.form != "bn" else dy
    bn, conv = as_computed(f.bn), as_computed(f.conv)     # evaluated nodes, as they were computed
    dconv, dgamma, dbeta, _, _ = GRADIENTS["batch_norm"](bn, lt.asarray(g, device=f.x.device))
    dx, dw = GRADIENTS["conv2d"](conv, dconv)
    out = {"x": dx, "w": dw, "gamma": dgamma, "beta": dbeta}
    if f.form == "residual":
        out["skip"] = lt.asarray(g, device=f.x.device)
    return {k: lt.evaluate(v).numpy() for k, v in out.items()}


def operands(x_shape, w_shape, form, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    k = w_shape[0]
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    gamma = rng.uniform(0.5, 2.0, k).astype(np.float32) * rng.choice([-1, 1], k).astype(np.float32)
    beta = rng.standard_normal(k).astype(np.float32)
    return rng, x, w, gamma, beta
