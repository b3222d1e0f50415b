"""`python -m lazytensor bench --suite several`: several results at once (lt.assign, lt.evaluate with
several expressions, one kernel with several outputs) against the same results assigned one by one,
NumPy (CPU) or CuPy (CUDA) eager, and the floor: one read of each input and one write of each output
at the copy bandwidth measured in the same run."""
from __future__ import annotations

import numpy as np

import lazytensor as lt
from lazytensor.bench.table import Table


def _momentum(v, w, g):
    v_new = 0.9 * v + g
    lt.assign([(v, v_new), (w, w - 0.01 * v_new)])


def _momentum_one_by_one(v, w, g):
    v[...] = 0.9 * v + g
    w[...] = w - 0.01 * v


def _tanh_gradients(a, b, c, d, outs):
    t = lt.tanh(a * b + c)
    dz = d * (1 - t * t)
    lt.assign(list(zip(outs, (dz * b, dz * a, dz, t))))


def _tanh_gradients_one_by_one(a, b, c, d, outs):
    t = lt.tanh(a * b + c)
    dz = d * (1 - t * t)
    for out, e in zip(outs, (dz * b, dz * a, dz, t)):
        out[...] = e


def _eager(xp, a, b, c, d):
    t = xp.tanh(a * b + c)
    dz = d * (1 - t * t)
    return dz * b, dz * a, dz, t


def run_several_bench(print_fn=print, device: str = "cpu", scale: int | None = None) -> Table:
    scale = scale or (24 if device == "cpu" else 26)
    n = 1 << scale
    if device == "cpu":
        from lazytensor.bench.cpu import _copy_bandwidth
        from lazytensor.kernels.timing import time_host
        xp, bw, timer, peer = np, _copy_bandwidth(1 << 28), time_host, "NumPy eager"
    else:
        import cupy as cp
        from lazytensor.bench.cuda import copy_bandwidth
        from lazytensor.kernels.timing import burst_ms
        xp, bw, peer = cp, max(copy_bandwidth(cp).values()), "CuPy eager"
        timer = lambda fn: burst_ms(fn) * 1e-3   # noqa: E731
    table = Table(f"lazytensor: several results at once on {device}", peer)
    table.notes.append(f"copy bandwidth measured in this run: {bw / 1e9:.1f} GB/s (read + write)")
    rng = np.random.default_rng(0)
    host = [rng.standard_normal(n).astype(np.float32) for _ in range(4)]
    arrays = [xp.asarray(h) for h in host]
    v, w, g, d = (lt.asarray(x, device=device) for x in arrays)

    case = f"momentum v, w = mu*v+g, w-lr*v_new, 2^{scale} f32"
    table.add(case, "lazytensor lt.assign (one kernel)", timer(lambda: _momentum(v, w, g)))
    table.add(case, "lazytensor, one assignment each", timer(lambda: _momentum_one_by_one(v, w, g)))
    xv, xw, xg = arrays[:3]

    def eager_momentum():
        xv[...] = 0.9 * xv + xg
        xw[...] = xw - 0.01 * xv
    table.add(case, peer, timer(eager_momentum))
    table.floor(case, 5 * n * 4 / bw, "3 reads + 2 writes of float32")

    case = f"gradients of sum(tanh(a*b+c)*d), 2^{scale} f32"
    outs = [lt.empty((n,), np.float32, device=device) for _ in range(4)]
    a, b, c = v, w, g
    table.add(case, "lazytensor lt.assign (one kernel)", timer(lambda: _tanh_gradients(a, b, c, d, outs)))
    table.add(case, "lazytensor, one assignment each", timer(lambda: _tanh_gradients_one_by_one(a, b, c, d, outs)))
    table.add(case, peer, timer(lambda: _eager(xp, *arrays)))
    table.floor(case, 8 * n * 4 / bw, "4 reads + 4 writes of float32")
    print_fn(table.render())
    return table
