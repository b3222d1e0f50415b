"""What lt.train_step(..., distributed=True) adds to the step: parameters broadcast from rank 0,
the gradients averaged over the ranks in buckets of BUCKET_BYTES (PyTorch DDP's 25 MB), each
bucket ONE all-reduce node in the step's plan over its gradients joined into one buffer, and the
loss averaged for the report.

Design: docs/design/distributed.md
"""
from __future__ import annotations

from lazytensor.distributed.collectives import broadcast
from lazytensor.ops.collectives import all_reduced
from lazytensor.ops.joining import concatenate
from lazytensor.ops.views import reshape

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
    """(the gradients averaged over the ranks, the buckets as (indices, bytes) pairs). A bucket's
    gradients are written into slices of one buffer (the concatenation's parts), which one
    all-reduce averages in place; each gradient is then a view of it."""
    groups = buckets(grads, bucket_bytes)
    result = [None] * len(grads)
    for k, idx in enumerate(groups, 1):
        label = f"gradient bucket {k} of {len(groups)}"
        if len(idx) == 1:
            result[idx[0]] = all_reduced(grads[idx[0]], "mean", label)
            continue
        joined = all_reduced(concatenate([reshape(grads[i], (-1,)) for i in idx]), "mean", label)
        offset = 0
        for i in idx:
            n = grads[i].size
            result[i] = reshape(joined[offset:offset + n], tuple(grads[i].shape))
            offset += n
    return result, [(idx, sum(grads[i].nbytes for i in idx)) for idx in groups]


def bucket_lines(groups) -> list:
    """lt.explain's lines on the buckets."""
    lines = [f"distributed: gradients averaged over the ranks in {len(groups)} bucket"
             f"{'s' if len(groups) != 1 else ''} of at most {BUCKET_BYTES / 2**20:g} MiB: each bucket's gradients "
             f"written into one buffer, ONE all_reduce CollectiveStep per bucket, placed in the plan after its "
             f"last gradient is written"]
    for k, (idx, nbytes) in enumerate(groups, 1):
        lines.append(f"  bucket {k}: {len(idx)} gradients, {nbytes / 2**20:.3f} MiB, parameters "
                     f"{min(idx)}..{max(idx)}")
    return lines
