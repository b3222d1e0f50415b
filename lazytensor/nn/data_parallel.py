"""What lt.train_step(..., distributed=True) adds to the step: parameters broadcast from rank 0,
the gradients averaged over the ranks in buckets of BUCKET_BYTES (PyTorch DDP's 25 MB), each
gradient one all-reduce node in the step's plan, and the loss averaged for the report.

Design: docs/design/distributed.md
"""
from __future__ import annotations

from lazytensor.distributed.collectives import broadcast
from lazytensor.ops.collectives import all_reduced

BUCKET_BYTES = 25 * 2**20


def broadcast_parameters(model, optimizer) -> None:
    """Every rank starts from rank 0's parameters, buffers and float32 master weights."""
    for t in model.parameters() + [t for _, t in model.named_buffers()]:
        broadcast(t, 0)
    for m in getattr(optimizer, "master", ()):
        if m is not None:
            broadcast(m, 0)


def buckets(grads, bucket_bytes: int = BUCKET_BYTES) -> list:
    """Indices of `grads` in buckets: the last parameters first (their gradients are written
    first in the backward), a bucket closed once it holds bucket_bytes; same-dtype gradients only."""
    out, current, size, dtype = [], [], 0, None
    for i in reversed(range(len(grads))):
        g = grads[i]
        if current and (size + g.nbytes > bucket_bytes or g.dtype != dtype):
            out.append(current)
            current, size = [], 0
        current.append(i)
        size += g.nbytes
        dtype = g.dtype
    if current:
        out.append(current)
    return out


def averaged(grads, bucket_bytes: int = BUCKET_BYTES) -> tuple:
    """(the gradients averaged over the ranks, the buckets as (indices, bytes) pairs)."""
    groups = buckets(grads, bucket_bytes)
    result = [None] * len(grads)
    # One all-reduce per gradient, labelled by its bucket: a bucket as one concatenated buffer gave
    # wrong gradients with SyncBatchNorm (tests/distributed/test_data_parallel.py), so it waits.
    for k, idx in enumerate(groups, 1):
        for i in idx:
            result[i] = all_reduced(grads[i], "mean", f"gradient bucket {k} of {len(groups)}")
    return result, [(idx, sum(grads[i].nbytes for i in idx)) for idx in groups]


def bucket_lines(groups) -> list:
    """lt.explain's lines on the buckets."""
    lines = [f"distributed: gradients averaged over the ranks in {len(groups)} bucket"
             f"{'s' if len(groups) != 1 else ''} of at most {BUCKET_BYTES / 2**20:g} MiB (for now one all_reduce "
             f"CollectiveStep per gradient, each placed in the plan after its gradient is written)"]
    for k, (idx, nbytes) in enumerate(groups, 1):
        lines.append(f"  bucket {k}: {len(idx)} gradients, {nbytes / 2**20:.3f} MiB, parameters "
                     f"{min(idx)}..{max(idx)}")
    return lines
