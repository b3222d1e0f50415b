"""lt.explain(step)'s memory section: every byte a recorded training step holds, by what holds it.

Design: docs/design/training-step.md, section "lazytensor/nn/step_memory.py".
"""
from __future__ import annotations

from lazytensor.core.memory import owner

_MB = 2.0 ** 20


def memory_parts(planned, optimizer) -> dict:
    """{part: bytes} of what a call of `planned` (a PlannedStep) holds; the parts add up to the
    memory of a call (and of the first call's peak)."""
    rec = planned.plan
    memory = rec.memory
    external = dict(memory.external)        # id(allocation) -> bytes, each counted once

    def take(tensors) -> int:
        return sum(external.pop(id(owner(t.data)), 0) for t in tensors if t is not None)

    parts = {"parameters": take(optimizer.params),
             "master weights": take(getattr(optimizer, "master", ())),
             "static inputs": take((planned.x, planned.labels)),
             "gradient regions": take(getattr(optimizer, "gradient_buffers", list)()),
             "other results": take(rec.dests)}
    parts["other tensors read"] = sum(external.values())
    parts["arena"] = memory.arena
    parts["cuDNN workspaces"] = sum(_cudnn_workspaces(rec.backend))
    return parts


def memory_lines(planned, optimizer) -> list:
    """The lines of lt.explain(step) about memory."""
    rec = planned.plan
    memory = rec.memory
    parts = memory_parts(planned, optimizer)
    persistent = sum(v for k, v in parts.items() if k not in ("arena", "cuDNN workspaces"))
    total = sum(parts.values())
    params = optimizer.params
    dtypes = "/".join(sorted({p.dtype.name for p in params}))
    lines = [f"memory of a call: {total / _MB:.3f} MB = persistent tensors {persistent / _MB:.3f} MB + arena "
             f"{parts['arena'] / _MB:.3f} MB + outside the arena {parts['cuDNN workspaces'] / _MB:.3f} MB; the "
             f"first call's peak is the same (the step is planned over placeholders holding no memory, then its "
             f"temporaries get the arena)",
             f"  persistent (kept between calls, written in place): parameters {parts['parameters'] / _MB:.3f} MB "
             f"({dtypes}), float32 master weights {parts['master weights'] / _MB:.3f} MB, the other results the step "
             f"writes {parts['other results'] / _MB:.3f} MB (optimizer state, step count, loss scale, loss), the "
             f"parameter regions' gradients {parts['gradient regions'] / _MB:.3f} MB, other "
             f"tensors it reads {parts['other tensors read'] / _MB:.3f} MB (batch_norm running statistics), static "
             f"inputs {parts['static inputs'] / _MB:.3f} MB",
             "  " + memory.describe()]
    live = memory.live_at_peak()
    if live:
        lines.append(f"  alive at the arena's peak (step {memory.peak_step + 1}), by the step that writes them: "
                     + ", ".join(f"{kind} {b / _MB:.3f} MB ({n})" for kind, b, n in live))
    if rec.backend.cudnn:
        sizes = _cudnn_workspaces(rec.backend)
        lines.append(f"  outside the arena: cuDNN workspaces {sum(sizes) / _MB:.3f} MB ({len(sizes)} in this process, "
                     f"one per graph kind shared by its graphs, the largest {max(sizes, default=0) / _MB:.3f} MB); the "
                     f"CUDA graph keeps no memory of its own (its steps run over the arena)")
    else:
        lines.append("  outside the arena: nothing on the CPU (a kernel's own scratch lives only while it runs)")
    return lines


def _cudnn_workspaces(backend) -> list:
    if not backend.cudnn:
        return []
    from lazytensor.cbr.cudnn_cache import default_cache
    return default_cache().workspaces()
