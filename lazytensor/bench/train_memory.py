"""`python -m lazytensor.bench.train_memory --model vgg16bn --px 32 --batch 512 [--device cuda]`:
one configuration of lt.train_step (AMP on CUDA), its peak memory against lt.explain(step)'s
breakdown of what a call holds, and its img/s.

The peak covers everything from building the model to the last timed step, as `bench --suite
train` measures it (lazytensor.tools.peak_memory); the breakdown (lazytensor.nn.step_memory) should
add up to it. `--lifetimes` prints the arena's temporaries as JSON [[bytes, first step, last step]]
(to try packings offline: lazytensor.step.memory_plan.pack).
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m lazytensor.bench.train_memory")
    p.add_argument("--model", default="vgg16bn")
    p.add_argument("--px", type=int, default=32)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lifetimes", action="store_true")
    a = p.parse_args(argv)

    import lazytensor as lt
    from lazytensor.bench.train import LR, MOMENTUM, WEIGHT_DECAY, _num_classes, _seconds_per_step
    from lazytensor.kernels.backend import backend_for
    from lazytensor.nn.step_memory import memory_parts
    from lazytensor.tools.peak_memory import PeakMemory, format_bytes
    from lazytensor.train.data import SyntheticBatches
    from lazytensor.train.models import build_model

    amp = a.device == "cuda"
    classes = _num_classes(a.px)
    x, labels = SyntheticBatches(a.batch, a.px, classes, a.device, count=1).batches[0]
    with PeakMemory(a.device) as peak:
        model = build_model(a.model, a.px, classes, dtype=np.float16 if amp else np.float32, device=a.device)
        optimizer = lt.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
        step = lt.train_step(model, lt.cross_entropy, optimizer, amp=amp)
        backend = backend_for(a.device)
        t = time.perf_counter()
        step(x, labels)
        backend.synchronize()
        first = time.perf_counter() - t
        first_peak = peak.bytes
        step(x, labels)
        backend.synchronize()
        seconds = _seconds_per_step(a.device)(lambda: step(x, labels)) if a.steps else float("nan")
        backend.synchronize()
    parts = memory_parts(step.last, optimizer)
    print(f"{a.model} {a.px}px batch {a.batch} on {a.device}{' (AMP)' if amp else ''}: {a.batch / seconds:,.0f} img/s, "
          f"first call {first:.1f} s")
    print(f"peak memory: {peak.describe()}; after the first call {format_bytes(first_peak)}")
    print(f"breakdown of a call: {format_bytes(sum(parts.values()))} = "
          + " + ".join(f"{k} {format_bytes(v)}" for k, v in parts.items()))
    print("\n".join(n for n in lt.explain(step, source=False).notes if n.startswith(("memory", "  ", "CUDA", "no CUDA"))))
    if a.lifetimes:
        print("lifetimes:", json.dumps([list(t) for t in step.last.plan.memory.lifetimes]))


if __name__ == "__main__":
    main()
