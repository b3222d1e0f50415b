"""The fwd+bwd rows of `python -m lazytensor bench --suite cbr`: one CBR training step
(relu(batch_norm(conv2d(x, w))) forward, then the fused backward: stage 1 drelu + dBN, wgrad, dgrad)
against its peers and its floor, in the same run as the forward rows (lazytensor/bench/cbr.py).

  lazytensor fused          the fused forward (out[...] = relu(batch_norm(conv2d(...)))), then ONE
                            lt.conv_grads call over stage 1's d(conv_out) expression: stage 1 (the dBN
                            sums give dgamma and dbeta on the way), wgrad, then dgrad (two streams where
                            that measured faster), one recipe and one CUDA graph
  ..., two calls            the same with stage 1 assigned to a tensor first, then lt.conv_grads over it
                            (two recipes, two graphs: the host cost of one call more)
  first layer               the same without dgrad (x is training data, lt.conv_grads(first_layer=True)):
                            faster by at least dgrad's time
  dBN stage                 stage 1 alone, against its own floor: one read of dY, of the conv output and of
                            the 1-bit mask, one write of d(conv_out)
  dBN sums / d(conv_out)    on CUDA, each of stage 1's two vectorized kernels against its own floor, and the
  kernel                    stage's kernels, as device time: launched 20 times in one CUDA graph
  PyTorch (CUDA)            channels_last, float16 under autocast, eager: torch.autograd.grad of the same
                            conv -> batch_norm -> relu for x, w, gamma, beta with the same dY; and the
                            same function through torch.compile (only where torch imports)
  NumPy (CPU)               the unfused path: im2col + BLAS forward, NumPy drelu + dBN, per-tap BLAS
                            dgrad and wgrad
  floor                     the best fprop + dgrad + wgrad plans (each timed alone here) plus the passes
                            no fusion avoids: the apply stage's read and write of the output, dBN's reads
                            of dY and of the conv output, and the write of d(conv_out), at the streaming
                            bandwidth measured in this run
"""
from __future__ import annotations

import re

import numpy as np

import lazytensor as lt


class BackwardCase:
    """A CbrCase (bench/cbr.py) with a fixed dY and the buffers of its backward."""

    def __init__(self, case, seed=1):
        self.case = case
        rng = np.random.default_rng(seed)
        shape = case.out.shape
        self.dy = lt.asarray(rng.standard_normal(shape, dtype=np.float32).astype(case.dtype), device=case.device)
        self.d_conv = lt.empty(shape, case.dtype, case.device)
        self.dx = lt.empty(case.x.shape, case.dtype, case.device)
        self.dw = lt.empty(case.w.shape, case.dtype, case.device)
        self.attrs = lt.conv2d(case.x, case.w, padding=1).attrs

    def stage1(self):
        d_conv, _, _, _ = lt.cbr_bn_backward(self.dy, self.case.saved, self.case.gamma)
        self.d_conv[...] = d_conv

    def backward(self, first_layer=False):
        """Stage 1 and the backward convolutions as one lt.conv_grads call: one recipe, one graph."""
        d_conv, _, _, _ = lt.cbr_bn_backward(self.dy, self.case.saved, self.case.gamma)
        return lt.conv_grads(d_conv, self.case.x, self.case.w, self.attrs, first_layer=first_layer)

    def fwd_bwd(self, first_layer=False):
        self.case.fused(True)
        self.backward(first_layer)

    def fwd_bwd_two_calls(self):
        self.case.fused(True)
        self.stage1()
        lt.conv_grads(self.d_conv, self.case.x, self.case.w, self.attrs)

    def dgrad_alone(self):
        self.dx[...] = lt.conv2d_backward_data(self.d_conv, self.case.w, self.case.x.shape, self.attrs)

    def wgrad_alone(self):
        self.dw[...] = lt.conv2d_backward_filter(self.case.x, self.d_conv, self.case.w.shape, self.attrs)


def add_rows(table, label, case, time_fn, bw, t_conv, guarded, peers=()):
    """The fwd+bwd, first-layer and dBN-stage rows of one shape. time_fn(fn) -> seconds per call;
    t_conv: the best conv plan alone (or None); peers: (name, fn) pairs timed as rows of the fwd+bwd case."""
    b = BackwardCase(case)
    full, first, dbn = f"{label} train fwd+bwd", f"{label} first layer fwd+bwd", f"{label} dBN stage"
    for _ in range(3):                      # plans, graphs and choices made; d_conv holds real values
        b.fwd_bwd()
        b.fwd_bwd_two_calls()
    # The forward's graph was captured by the forward-only rows: it hands its results out again only
    # while nothing but the caller's holder refers to them (a cuDNN rejection that kept the first
    # backward's frames alive made every later forward run step by step; cbr/cudnn_cache.py)
    if case.device == "cuda":
        table.notes.append(f"{label}: forward after 3 fwd+bwd calls: {_replay_line(case.expression(True), case.out)}")
        case.fused(True)                    # explain filled the holder with arrays it planned
    lt.release_graphs()                     # the fwd+bwd loop captures its own graphs, as a training loop does
    t_dgrad = guarded(table, full, "dgrad alone (lazytensor, best plan)", lambda: time_fn(b.dgrad_alone))
    t_wgrad = guarded(table, full, "wgrad alone (lazytensor, best plan)", lambda: time_fn(b.wgrad_alone))
    out_bytes = case.out_bytes
    passes = 5 * out_bytes / bw      # apply: read + write; dBN: read dY, read the conv output; write d(conv_out)
    if None not in (t_conv, t_dgrad, t_wgrad):
        table.floor(full, t_conv + t_dgrad + t_wgrad + passes,
                    "best fprop + dgrad + wgrad plans + apply read/write + dBN reads of dY and the conv output "
                    "+ the write of d(conv_out)")
        table.floor(first, t_conv + t_wgrad + passes, "as fwd+bwd, without dgrad")
    t_full = guarded(table, full, "lazytensor fused", lambda: time_fn(b.fwd_bwd))
    guarded(table, full, "lazytensor fused, two calls (stage 1, then lt.conv_grads)",
            lambda: time_fn(b.fwd_bwd_two_calls))
    t_first = guarded(table, first, "lazytensor fused, no dgrad", lambda: time_fn(lambda: b.fwd_bwd(True)))
    if None not in (t_full, t_first, t_dgrad):
        table.notes.append(f"{label}: first layer saves {(t_full - t_first) * 1e3:.3f} ms against a dgrad of "
                           f"{t_dgrad * 1e3:.3f} ms")
    try:
        _call_notes(table, label, b)
    except Exception as e:  # noqa: BLE001 - notes only
        table.notes.append(f"{label}: fwd+bwd call notes failed: {type(e).__name__}: {e}")
    for name, fn in peers:
        guarded(table, full, name, lambda fn=fn: time_fn(fn(b)))
    n_el = case.out.data.size
    table.floor(dbn, (3 * out_bytes + n_el / 8) / bw, "1 read of dY, of the conv output and of the mask + "
                                                       "1 write of d(conv_out)")
    guarded(table, dbn, "lazytensor stage 1 (drelu + dBN)", lambda: time_fn(b.stage1))
    table.notes.append(f"{label}: dBN stage in two passes (the sums read dY, the conv output and the mask; "
                       f"d(conv_out) reads them again and writes): at least {(5 * out_bytes + n_el / 4) / bw * 1e3:.3f} "
                       "ms unless the second pass finds the first's last rows in L2")
    try:
        _stage_kernel_rows(table, label, b, time_fn, bw, guarded)
    except Exception as e:  # noqa: BLE001 - the other rows stand without these
        table.notes.append(f"{label}: stage 1's kernels not timed alone: {type(e).__name__}: {e}")
    d_conv, _, _, _ = lt.cbr_bn_backward(b.dy, case.saved, case.gamma)
    text = lt.explain(d_conv, source=False)
    choice = [line.strip() for line in str(text).splitlines() if "stage 1:" in line]
    if choice:
        table.notes.append(f"{label}: backward {choice[0]}")
    return b


def _replay_line(expr, out) -> str:
    text = str(lt.explain(expr, out=out, source=False))
    return next((line for line in text.splitlines() if line.startswith("CUDA graph replay")), "no graph replay")


def _call_notes(table, label, b):
    """What each part of the fwd+bwd call does on the host: graph replay or steps from Python (after
    the timed calls, so the counts are theirs), and its host time per call in a loop without
    synchronization (a part whose host time exceeds its GPU time makes the row host-bound)."""
    import time
    case = b.case
    sync = case.out.backend.synchronize
    table.notes.append(f"{label} fwd+bwd, forward: {_replay_line(case.expression(True), case.out)}")
    case.fused(True)        # explain filled the holder with arrays it planned: the forward's results again
    d_conv, _, _, _ = lt.cbr_bn_backward(b.dy, case.saved, case.gamma)
    table.notes.append(f"{label} fwd+bwd, stage 1: {_replay_line(d_conv, b.d_conv)}")
    for line in _conv_grads_lines(b):
        table.notes.append(f"{label} fwd+bwd, lt.conv_grads: {line}")
    parts = {"forward": lambda: case.fused(True), "backward (stage 1 within lt.conv_grads)": b.backward,
             "stage 1 alone": b.stage1, "lt.conv_grads over the stage's result": lambda: lt.conv_grads(
                 b.d_conv, case.x, case.w, b.attrs), "whole fwd+bwd": b.fwd_bwd}
    times = []
    for name, fn in parts.items():
        fn()
        sync()
        rounds = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(10):
                fn()
            rounds.append((time.perf_counter() - t) / 10)
            sync()
        times.append(f"{name} {sorted(rounds)[2] * 1e6:.0f} us")
    table.notes.append(f"{label} fwd+bwd, host time per call (no synchronization inside the loop): " + ", ".join(times))


def _conv_grads_lines(b):
    """What lt.explain says of the fwd+bwd call's lt.conv_grads (stage 1 within it): its steps, one
    stream or two and why, each cuDNN
    graph's plan and its source (the experience table's winner, timed, or cuDNN's heuristic), and its
    recipe and graph replay."""
    case = b.case
    d_conv, _, _, _ = lt.cbr_bn_backward(b.dy, case.saved, case.gamma)
    text = str(lt.explain(lt.ConvGradsCall(d_conv, case.x, case.w, b.attrs)))
    keep = ("WgradThenDgrad", "note: measured", "note: LAZYTENSOR", "ConvBackward", "plan:", "recipe:",
            "CUDA graph replay", "DbnSums", "DbnDx", "FusedReduction", "FusedElementwise")
    lines = [re.sub(r"^\[\d+\] ", "", line.strip()) for line in text.splitlines()]
    return [line for line in lines if line.startswith(keep)]


def _stage_kernel_rows(table, label, b, time_fn, bw, guarded, reps: int = 20):
    """On CUDA, the device time of stage 1's kernels against their own floors: each vectorized dBN
    kernel step (lazytensor.plan.conv.dbn_cuda), and the whole stage, launched `reps` times as one
    CUDA graph, so that no host cost per launch hides the GPU time of a small shape."""
    from lazytensor.kernels.backend import backend_for
    from lazytensor.plan.planner import plan
    backend = backend_for(b.case.device)
    if not backend.graphs:
        return
    d_conv, _, _, _ = lt.cbr_bn_backward(b.dy, b.case.saved, b.case.gamma)
    steps = plan(d_conv, b.d_conv.data, backend)
    out_bytes, mask_bytes = b.case.out_bytes, b.case.out.data.size / 8
    floors = {"DbnSumsStep": ("dBN sums kernel", 2 * out_bytes + mask_bytes,
                              "1 read of dY, of the conv output and of the mask"),
              "DbnDxStep": ("d(conv_out) kernel", 3 * out_bytes + mask_bytes,
                            "1 read of dY, of the conv output and of the mask + 1 write of d(conv_out)")}

    def device_time(group):
        graph = backend.capture(lambda: [s.run() for _ in range(reps) for s in group])
        return time_fn(graph.launch) / reps

    for s in steps:
        s.run()                             # real values in the temporaries before anything is timed
    for step in steps:
        found = floors.get(type(step).__name__)
        if found is not None:
            what, nbytes, why = found
            row = f"{label} {what}"
            table.floor(row, nbytes / bw, why)
            guarded(table, row, f"lazytensor {what}, device time ({reps} in one CUDA graph)",
                    lambda step=step: device_time([step]))
    guarded(table, f"{label} dBN stage", f"lazytensor stage 1 kernels, device time ({reps} in one CUDA graph)",
            lambda: device_time(steps))


# -- peers ---------------------------------------------------------------------------------------

def torch_view(torch, array):
    """A PyTorch view of a CuPy array; bfloat16 travels as its 16-bit pattern (DLPack may lack it)."""
    if array.dtype == lt.bfloat16:
        return torch.from_dlpack(array.view(np.uint16)).view(torch.bfloat16)
    return torch.from_dlpack(array)


def torch_peers(torch, case):
    """(name, make) pairs: make(backward_case) -> a callable running one fwd+bwd in PyTorch."""
    import torch.nn.functional as F
    x = torch_view(torch, case.x.data).permute(0, 3, 1, 2).detach().requires_grad_(True)
    w = torch_view(torch, case.w.data).permute(0, 3, 1, 2).detach().requires_grad_(True)
    gamma = torch_view(torch, case.gamma.data).clone().requires_grad_(True)
    beta = torch_view(torch, case.beta.data).clone().requires_grad_(True)
    k = w.shape[0]
    rm = torch.zeros(k, device=x.device)
    rv = torch.ones(k, device=x.device)

    def forward(x, w, gamma, beta):
        y = F.conv2d(x, w, padding=1)
        return F.relu(F.batch_norm(y, rm, rv, gamma, beta, training=True, momentum=0.1, eps=1e-5))

    def make(fn):
        def build(b):
            dy = torch_view(torch, b.dy.data).permute(0, 3, 1, 2)

            def step():
                # 16-bit activations under autocast in their dtype; float32 ones in float32 (PyTorch's default TF32)
                half = x.dtype in (torch.float16, torch.bfloat16)
                with torch.autocast("cuda", dtype=x.dtype if half else torch.float16, enabled=half):
                    y = fn(x, w, gamma, beta)
                return torch.autograd.grad(y, (x, w, gamma, beta), dy if dy.dtype == y.dtype else dy.to(y.dtype))
            return step
        return build

    peers = [("PyTorch", make(forward))]
    try:
        compiled = torch.compile(forward)
        peers.append(("PyTorch torch.compile", make(compiled)))
    except Exception:  # noqa: BLE001 - no compile peer where torch.compile is unavailable
        pass
    return peers


def numpy_peer(case):
    """The unfused fwd+bwd in NumPy (float32): the CPU table's baseline."""
    from lazytensor.cbr.conv_cpu import conv2d_backward_data_nhwc, conv2d_backward_filter_nhwc, conv2d_nhwc
    x, w = case.x_host, case.w_host
    gamma, beta = case.gamma.numpy(), case.beta.numpy()

    def build(b):
        dy = b.dy.numpy()

        def step():
            y = conv2d_nhwc(x, w, 1, 1, 1)
            mean, var = y.mean(axis=(0, 1, 2)), y.var(axis=(0, 1, 2))
            inv = 1.0 / np.sqrt(var + 1e-5)
            x_hat = (y - mean) * inv
            out = np.maximum(x_hat * gamma + beta, 0)
            g = np.where(out > 0, dy, 0)
            n = y.size // y.shape[-1]
            dbeta, dgamma = g.sum(axis=(0, 1, 2)), (g * x_hat).sum(axis=(0, 1, 2))
            d_conv = (gamma * inv) * (g - dbeta / n - x_hat * (dgamma / n))
            d_conv = d_conv.astype(np.float32)
            return (conv2d_backward_data_nhwc(d_conv, w, x.shape, 1, 1, 1),
                    conv2d_backward_filter_nhwc(x, d_conv, w.shape, 1, 1, 1), dgamma, dbeta)
        return step
    return [("NumPy", build)]
