"""Planning an all-reduce (lazytensor.ops.collectives): its operand evaluated into a buffer of its
own, then one CollectiveStep that reduces the buffer in place over every rank (MPI for host
arrays, NCCL for CUDA ones: kernels/collectives.py). The first run checks that every rank reduces
the same shape and dtype, and raises naming both where they differ."""
from __future__ import annotations

from lazytensor.core.tensor import Tensor
from lazytensor.kernels.collectives import group
from lazytensor.plan.steps import Learned, Step


class CollectiveStep(Step):
    """all_reduce of `buf` in place over every rank of the job."""
    __slots__ = ("backend", "buf", "spec", "checked")
    writes = ("buf",)
    collective = True       # a CUDA graph holding it is watched (kernels/collectives.py, Group.watch)

    def __init__(self, backend, buf, spec):
        self.backend, self.buf, self.spec, self.checked = backend, buf, spec, Learned()

    def run(self):
        g = group()
        what = f"all_reduce({self.spec.label})" if self.spec.label else "all_reduce"
        if not self.checked.value:
            g.check_same(what, f"{self.spec.op} of {self.buf.dtype} {tuple(self.buf.shape)}")
            self.checked.value = True
        g.all_reduce(self.buf, self.spec.op, what)

    def capture_refusal(self):
        if not self.backend.graphs:
            return f"the {self.backend.name} backend has no graphs"
        return None     # NCCL's calls are captured into the graph on the current stream

    def describe(self, source: bool = True) -> str:
        g = group()
        over = "NCCL" if self.backend.cuda_kernels else "MPI"
        label = f" ({self.spec.label})" if self.spec.label else ""
        return (f"CollectiveStep on {self.backend.name}: all_reduce {self.spec.op}{label} of {self.buf.dtype.name} "
                f"{tuple(self.buf.shape)}, {self.buf.nbytes / 2**20:.3f} MiB, in place over {g.size} rank"
                f"{'s' if g.size != 1 else ''} through {over}")


def build_all_reduce(node, backend, cut, out):
    x = cut(node.args[0])
    buf = backend.empty(tuple(node.shape), node.dtype)
    steps = cut.plan(x, buf, backend)
    steps.append(CollectiveStep(backend, buf, node.attrs))
    return steps, Tensor(buf, node.device)
