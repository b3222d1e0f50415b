"""all_reduce, broadcast, all_gather on tensors, now: each evaluates its tensor, runs the collective
on a copy of its array and writes the result back through an assignment (so expressions reading
the tensor keep the values they had). Every rank must call them in the same order, on the same
shape and dtype: a mismatch raises CollectiveMismatch naming both."""
from __future__ import annotations

from lazytensor.assign.evaluate import evaluate
from lazytensor.core.tensor import Tensor, asarray
from lazytensor.kernels.collectives import OPS, group


def _array_of(t, what):
    if not isinstance(t, Tensor):
        raise TypeError(f"lazytensor.distributed.{what}: takes a Tensor (it is written in place); got "
                        f"{type(t).__name__}; use lazytensor.distributed.all_reduced(expr) inside expressions")
    return evaluate(t).data.copy()


def all_reduce(t, op: str = "sum"):
    """t replaced, in place, by the op (sum, mean, max, min, prod) of every rank's t; returns t."""
    if op not in OPS:
        raise ValueError(f"lazytensor.distributed.all_reduce: op must be one of {', '.join(OPS)}; got {op!r}")
    a = _array_of(t, "all_reduce")
    g = group()
    g.check_same("all_reduce", f"{op} of {a.dtype} {tuple(a.shape)}")
    g.all_reduce(a, op, "all_reduce")
    t[...] = asarray(a, device=t.device)
    return t


def broadcast(t, root: int = 0):
    """t replaced, in place, by rank `root`'s t; returns t."""
    g = group()
    if not 0 <= root < g.size:
        raise ValueError(f"lazytensor.distributed.broadcast: root {root} is not a rank of {g.size}")
    a = _array_of(t, "broadcast")
    g.check_same("broadcast", f"from {root} of {a.dtype} {tuple(a.shape)}")
    g.broadcast(a, root, "broadcast")
    t[...] = asarray(a, device=t.device)
    return t


def all_gather(t):
    """A new Tensor of shape (world_size,) + t.shape: row r is rank r's t."""
    a = _array_of(t, "all_gather")
    g = group()
    g.check_same("all_gather", f"{a.dtype} {tuple(a.shape)}")
    xp = __import__("numpy") if t.device == "cpu" else __import__("cupy")
    out = xp.empty((g.size,) + tuple(a.shape), a.dtype)
    g.all_gather(a, out, "all_gather")
    return asarray(out, device=t.device)
