"""The plain training loop a new user writes first, against lt.train_step and PyTorch eager, and
lt.grad's host time on a structure it has seen (its gradient template) and on a new one.

    loss = lt.cross_entropy(model(x), labels)
    opt.step(lt.grad(loss, model.parameters()))

CPU: the small VGG, batch 8; CUDA: VGG16-BN at 32 x 32, batch 128. float32 on both sides (the dtype
of a newcomer's model), SGD with momentum and weight decay as in the train suite. Targets: the
plain loop at least 0.9x lt.train_step's img/s (CUDA; within 1.1x its time on the CPU), lt.grad on
a seen structure at most 5 us per node of the gradient DAG.
"""
from __future__ import annotations

import time

import numpy as np

from lazytensor.bench.train import LR, MOMENTUM, WEIGHT_DECAY, _seconds_per_step, _torch, _torch_mode


def _config(device):
    return ("small_vgg", 32, 8) if device == "cpu" else ("vgg16bn", 32, 128)


def _setup(device):
    import lazytensor as lt
    from lazytensor.train.data import SyntheticBatches
    from lazytensor.train.models import build_model
    name, px, batch = _config(device)
    model = build_model(name, px, 10, dtype=np.float32, device=device)
    x, labels = SyntheticBatches(batch, px, 10, device, count=1).batches[0]
    opt = lt.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    return model, x, labels, opt


def plain_loop_seconds(device, timer) -> float:
    import lazytensor as lt
    model, x, labels, opt = _setup(device)
    params = list(model.parameters())

    def step():
        loss = lt.cross_entropy(model(x), labels)
        opt.step(lt.grad(loss, params))
    return timer(step)


def train_step_seconds(device, timer) -> float:
    import lazytensor as lt
    model, x, labels, opt = _setup(device)
    step = lt.train_step(model, lt.cross_entropy, opt)
    return timer(lambda: step(x, labels))


def grad_host_times(device, calls: int = 50):
    """(us per lt.grad on a seen structure, us on a new one, nodes of the gradient DAG) for the model's loss."""
    import lazytensor as lt
    from lazytensor.autodiff import templates
    model, x, labels, _ = _setup(device)
    params = list(model.parameters())
    lt.grad(lt.cross_entropy(model(x), labels), params)
    seen = new = 0.0
    for _ in range(calls):
        loss = lt.cross_entropy(model(x), labels)
        start = time.perf_counter()
        grads = lt.grad(loss, params)
        seen += time.perf_counter() - start
        assert grads.from_template
        templates.clear()
        start = time.perf_counter()
        lt.grad(loss, params)
        new += time.perf_counter() - start
    nodes = max(len(t.instructions) for t in templates._templates.values() if t is not None)
    return seen / calls * 1e6, new / calls * 1e6, nodes


def run(print_fn, device: str) -> list:
    """Prints the plain-loop table; returns its target lines."""
    name, px, batch = _config(device)
    timer = _seconds_per_step(device)
    rows = [("lazytensor plain loop", plain_loop_seconds(device, timer)),
            ("lazytensor lt.train_step", train_step_seconds(device, timer))]
    torch = _torch(device)
    if torch is not None:
        seconds, _ = _torch_mode(torch, "eager", name, px, batch, device, timer, amp=None)
        rows.append(("PyTorch eager", seconds))
    print_fn(f"natural code: the plain training loop, {name} {px}x{px} batch {batch} float32, {device}")
    step_s = dict(rows)["lazytensor lt.train_step"]
    for label, seconds in rows:
        print_fn(f"  {label:28s} {batch / seconds:10.0f} img/s  {step_s / seconds:5.2f}x lt.train_step's speed")
    seen, new, nodes = grad_host_times(device)
    print_fn(f"  lt.grad of the loss: {seen:.0f} us on a seen structure ({seen / nodes:.2f} us per node of its "
             f"{nodes}-node gradient DAG), {new:.0f} us on a new one")
    plain = dict(rows)["lazytensor plain loop"]
    lines = [f"  plain loop: {step_s / plain:.2f}x lt.train_step's speed, target at least 0.9x "
             f"({'pass' if step_s / plain >= 0.9 else 'MISS'})",
             f"  lt.grad on a seen structure: {seen / nodes:.2f} us per node, target at most 5 "
             f"({'pass' if seen / nodes <= 5 else 'MISS'})"]
    if torch is not None:
        eager = dict(rows)["PyTorch eager"]
        lines.append(f"  plain loop: {eager / plain:.2f}x PyTorch eager's speed")
    return lines
