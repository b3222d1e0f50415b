"""`python -m lazytensor bench --suite autodiff [--device cuda]`: gradients through lt.grad.

1. The gradients of a, b, c, d of sum(tanh(a * b + c) * d), evaluated together (one kernel with
   four outputs), against the floor (4 reads + 4 writes at the copy bandwidth of the same run), the
   same backward written by hand in NumPy (CPU), and PyTorch eager and torch.compile (CUDA, when
   torch is importable). 2^24 float32 elements on the CPU, 2^26 on CUDA.
2. One MLP training step, 784 -> 4096 -> 4096 -> 10, batch 8192 (CUDA; 512 on the CPU), float32
   and float16 (SGD updating the float16 weights, as PyTorch's over a half model: no float32 master
   weights): forward, lt.grad, SGD update, against PyTorch eager and torch.compile; twice: the
   plain loop (the step built and walked on every call) and lt.train_step (recorded once, one CUDA
   graph on CUDA), checked to be the same step (the same losses from the same weights).
"""
from __future__ import annotations

import numpy as np

import lazytensor as lt
from lazytensor.bench.table import Table


def _timer(device):
    if device == "cpu":
        from lazytensor.kernels.timing import time_host
        return lambda fn: time_host(fn, repeat=5)
    from lazytensor.kernels.timing import burst_ms
    # Bursts of 50 calls: each burst starts on an idle GPU, so its first call's host time (a gradient
    # step builds its expressions: 0.2-0.45 ms of host work on the H200's host, about the kernel's
    # own time) is idle GPU time inside the burst. Over 10 calls that added 1/10 of it to every row
    # (about 0.05x of the gradient row's floor); over 50, 1/50. Every peer is timed the same way.
    return lambda fn: burst_ms(fn, burst=50) * 1e-3


def _bandwidth(device) -> float:
    if device == "cpu":
        from lazytensor.bench.cpu import _copy_bandwidth
        return _copy_bandwidth(1 << 28)
    import cupy as cp
    from lazytensor.bench.cuda import copy_bandwidth
    return max(copy_bandwidth(cp).values())


def _torch(device):
    if device != "cuda":
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _elementwise_gradients(table, device, timer, bw):
    scale = 24 if device == "cpu" else 26
    n = 1 << scale
    rng = np.random.default_rng(0)
    host = [rng.standard_normal(n).astype(np.float32) for _ in range(4)]
    a, b, c, d = (lt.asarray(h, device=device) for h in host)
    outs = [lt.empty((n,), np.float32, device=device) for _ in range(4)]

    def lazytensor_step():
        grads = lt.grad(lt.sum(lt.tanh(a * b + c) * d), [a, b, c, d])
        lt.assign(list(zip(outs, grads)))

    case = f"gradients of a, b, c, d of sum(tanh(a*b+c)*d), 2^{scale} f32"
    table.add(case, "lazytensor lt.grad + lt.assign", timer(lazytensor_step))
    table.floor(case, 8 * n * 4 / bw, "4 reads + 4 writes of float32")
    if device == "cpu":
        from lazytensor.kernels.cpu import stream_stores
        threshold = stream_stores.MIN_BYTES
        stream_stores.MIN_BYTES = 1 << 62           # the same kernel with ordinary stores, for comparison
        try:
            table.add(case, "lazytensor, ordinary stores (no kernel_stream)", timer(lazytensor_step))
        finally:
            stream_stores.MIN_BYTES = threshold

        def numpy_backward():
            t = np.tanh(host[0] * host[1] + host[2])
            s = (1 - t * t) * host[3]
            return s * host[1], s * host[0], s, t
        table.add(case, "NumPy (backward by hand)", timer(numpy_backward))
    torch = _torch(device)
    if torch is not None:
        ta, tb, tc, td = (torch.from_dlpack(x.data).requires_grad_() for x in (a, b, c, d))

        def torch_step():
            loss = (torch.tanh(ta * tb + tc) * td).sum()
            return torch.autograd.grad(loss, (ta, tb, tc, td))
        table.add(case, "PyTorch eager", timer(torch_step))
        compiled = torch.compile(torch_step)
        compiled()
        table.add(case, "torch.compile", timer(compiled))
    return case


def _mlp_model(device, dtype, seed=1):
    """The bench's MLP as an lt.nn.Sequential of Linear and ReLU, its input and labels."""
    batch = 8192 if device == "cuda" else 512
    rng = np.random.default_rng(seed)
    dims = (784, 4096, 4096, 10)
    x = lt.asarray(rng.standard_normal((batch, dims[0])).astype(dtype), device=device)
    labels = lt.asarray(rng.integers(0, 10, batch), device=device)
    model = lt.nn.Sequential(lt.nn.Linear(784, 4096, dtype=dtype, device=device, rng=rng), lt.nn.ReLU(),
                             lt.nn.Linear(4096, 4096, dtype=dtype, device=device, rng=rng), lt.nn.ReLU(),
                             lt.nn.Linear(4096, 10, dtype=dtype, device=device, rng=rng))
    return model, x, labels


def mlp_optimizer(model):
    """SGD as the PyTorch peer's: torch.optim.SGD over a model cast to float16 updates the float16
    weights themselves, so lazytensor's SGD keeps no float32 master weights here (master_weights=False)."""
    return lt.nn.SGD(model.parameters(), lr=0.01, master_weights=False)


def mlp_loss(logits, labels):
    """The loss of the MLP step, in float32 whatever the logits' dtype (as the PyTorch peer's .float())."""
    return lt.cross_entropy(logits.astype(np.float32), labels)


def plain_mlp_step(model, opt):
    """The step as a user writes it: forward, lt.grad, opt.step (one lt.assign), built on every call.
    Returns the loss expression (it keeps the value it had before the update)."""
    def step(x, labels):
        loss = mlp_loss(model(x), labels)
        opt.step(lt.grad(loss, opt.params))
        return loss
    return step


def same_step(device, dtype, steps: int = 3) -> float:
    """The largest relative difference between the losses of the plain loop and of lt.train_step
    over `steps` steps from the same weights (the same step: 0 or rounding)."""
    losses = []
    for record in (False, True):
        model, x, labels = _mlp_model(device, dtype)
        opt = mlp_optimizer(model)
        step = lt.train_step(model, mlp_loss, opt) if record else plain_mlp_step(model, opt)
        losses.append([float(step(x, labels).numpy()) for _ in range(steps)])
    return max(abs(a - b) / abs(a) for a, b in zip(*losses))


def _mlp(table, device, timer, dtype):
    model, x, labels = _mlp_model(device, dtype)
    opt = mlp_optimizer(model)
    plain = plain_mlp_step(model, opt)
    case = f"MLP 784-4096-4096-10 training step, batch {x.shape[0]}, {np.dtype(dtype).name}"
    table.add(case, "lazytensor, plain loop: opt.step(lt.grad(loss, params))", timer(lambda: plain(x, labels)))
    model, x, labels = _mlp_model(device, dtype)
    step = lt.train_step(model, mlp_loss, mlp_optimizer(model))
    table.add(case, "lazytensor lt.train_step (recorded; one CUDA graph on cuda)", timer(lambda: step(x, labels)))
    graph = step.last.plan.describe_graph()
    table.notes.append(f"{case}: lt.train_step: {graph}; the same step as the plain loop: losses of 3 steps "
                       f"from the same weights {same_step(device, dtype):.1e} apart (relative)")
    step = model = plain = opt = None
    torch = _torch(device)
    if torch is not None:
        tdtype = torch.float16 if dtype == np.float16 else torch.float32
        net = torch.nn.Sequential(torch.nn.Linear(784, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096),
                                  torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda().to(tdtype)
        topt = torch.optim.SGD(net.parameters(), lr=0.01)
        tx = torch.from_dlpack(x.data)
        tl = torch.from_dlpack(labels.data)

        def torch_step():
            topt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(net(tx).float(), tl)
            loss.backward()
            topt.step()
        table.add(case, "PyTorch eager", timer(torch_step))
        compiled = torch.compile(torch_step)
        compiled()
        table.add(case, "torch.compile", timer(compiled))


def run_autodiff_bench(print_fn=print, device: str = "cpu", cases=("gradients", "mlp")) -> Table:
    """cases: "gradients" (the elementwise gradients) and/or "mlp" (the MLP step)."""
    timer = _timer(device)
    peer = "NumPy (backward by hand)" if device == "cpu" else ("PyTorch eager" if _torch(device) else "lazytensor")
    table = Table(f"lazytensor autodiff benchmark on {device}", peer)
    if "gradients" in cases:
        bw = _bandwidth(device)
        table.notes.append(f"copy bandwidth measured in this run: {bw / 1e9:.1f} GB/s (read + write)")
        _elementwise_gradients(table, device, timer, bw)
    for dtype in (np.float32, np.float16) if "mlp" in cases else ():
        _mlp(table, device, timer, dtype)
    print_fn(table.render())
    return table
