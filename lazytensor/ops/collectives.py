"""Collectives as nodes: `all_reduced(x, op)` is x reduced over every rank of the job, a heavy node
whose step (lazytensor.plan.heavy.collectives) runs the collective on x evaluated into a buffer,
inside the plan, so a recorded training step holds its all-reduces. Its gradient is the all-reduce
of the output gradient (lazytensor.autodiff.rules_collectives).

Design: docs/design/distributed.md
"""
from __future__ import annotations

from dataclasses import dataclass

from lazytensor.core.expr import Expr
from lazytensor.core import tensor as _tensor
from lazytensor.kernels.collectives import OPS


@dataclass(frozen=True)
class Collective:
    op: str             # "sum", "mean", "max", "min", "prod"
    label: str = ""     # what it is for, in lt.explain ("gradient bucket 1 of 3", "SyncBatchNorm statistics")


def all_reduced(x, op: str = "sum", label: str = ""):
    """x reduced elementwise over every rank (op: sum, mean, max, min, prod), lazily."""
    if op not in OPS:
        raise ValueError(f"lazytensor.distributed.all_reduce: op must be one of {', '.join(OPS)}; got {op!r}")
    x = _tensor.as_node(x)
    return Expr("all_reduce", (x,), tuple(x.shape), x.dtype, x.device, heavy=True, attrs=Collective(op, label))
