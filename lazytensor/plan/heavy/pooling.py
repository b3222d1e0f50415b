"""Planning max_pool2d, avg_pool2d and their backward ops: one step each, a numba kernel on the CPU
(lazytensor.kernels.cpu.pool, the twin of the CUDA kernel) and a generated CUDA C kernel on CUDA
(lazytensor.kernels.cuda.pool).
Operands that are expressions are evaluated first; the CUDA kernels index dense NHWC, so a strided
operand is copied to a dense one there (explain shows the copy)."""
from __future__ import annotations

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.kernels import launch_log
from lazytensor.core.memory import may_overlap
from lazytensor.plan.elementwise import copy_step
from lazytensor.plan.evaluated import materialized
from lazytensor.plan.steps import Step


class PoolStep(Step):
    """out = the pooling (direction "forward") or its input gradient ("backward") of x; g is the output
    gradient (backward only), x is None for avg pooling's backward on the CPU; argmax: the CUDA max
    pooling backward's byte per window where its windows overlap (pool_cuda.backward_kernels), else None."""
    __slots__ = ("backend", "direction", "attrs", "x", "g", "out", "argmax")
    writes = ("out", "argmax")

    def __init__(self, backend, direction, attrs, x, g, out, argmax=None):
        self.backend, self.direction, self.attrs, self.x, self.g, self.out = backend, direction, attrs, x, g, out
        self.argmax = argmax

    def run(self):
        a = self.attrs
        if not self.backend.cuda_kernels:
            from lazytensor.kernels.cpu.pool_tier import run_pool    # (numba's, or its NumPy twin meanwhile)
            run_pool(self.backend.compiler, self.direction, a.kind, self.x, self.g, a.kernel, a.stride, a.padding,
                     self.out)
        else:
            compiler = self.backend.compiler
            if self.direction == "forward":
                _pool_cuda().pool_forward(compiler, a.kind, self.x, a.kernel, a.stride, a.padding, self.out)
            else:
                x = self.g if self.x is None else self.x      # avg pooling's kernel never reads x
                _pool_cuda().pool_backward(compiler, a.kind, x, self.g, a.kernel, a.stride, a.padding, self.out,
                                        self.argmax)
        if launch_log.listeners:
            launch_log.record(launch_log.KernelRecord(f"{a.kind}_pool2d_{self.direction}", self.backend.name,
                                                      "pool", int(self.out.size), "memory", 0.0))

    def describe(self, source: bool = True) -> str:
        a = self.attrs
        what = "generated CUDA C kernel" if self.backend.cuda_kernels else "numba kernel"
        name = f"{a.kind}_pool2d" + ("" if self.direction == "forward" else " backward")
        text = (f"Pool on {self.backend.name}: {name}, kernel {a.kernel}, stride {a.stride}, padding "
                f"{a.padding}, {a.in_shape} -> {self.out.shape} {self.out.dtype}: {what}")
        kernels = (self.direction,)
        if self.direction == "backward" and self.backend.cuda_kernels:
            kernels = _pool_cuda().backward_kernels(a.kind, self.out.shape, self.g.shape, a.kernel, a.stride, a.padding)
        if a.kind == "max" and self.direction == "backward":
            text += "; each window's gradient to its first max (last NaN)"
        if kernels == ("backward_windows",):
            text += "; windows do not overlap: one thread per window writes its cells"
            if not _pool_cuda().windows_cover(a.in_shape, self.g.shape, a.kernel, a.stride, a.padding):
                text += " (cells no window holds zeroed first)"
        elif kernels == ("argmax", "backward_indexed"):
            text += ("; windows overlap: two kernels, each window's argmax found once into a byte, then a gather "
                     "per input cell over the windows that hold it, comparing its place with that byte")
        elif self.direction == "backward" and self.backend.cuda_kernels:
            text += "; windows overlap: a gather per input cell over the windows that hold it"
        if self.backend.cuda_kernels:
            vec = _pool_cuda().vector_width(self.out.dtype, self.out.shape[3])
            text += f"; {vec} channels per thread" if vec > 1 else "; one channel per thread"
        if source and self.backend.cuda_kernels:
            for kernel in kernels:
                kernel = _pool_cuda().render_pool(kernel, a.kind, self.out.dtype, vec=vec).kernel
                text += "\n" + "\n".join("    " + line for line in kernel.splitlines())
        return text


def _operand(node, backend, cut, steps):
    t = materialized(cut(node), backend, steps, cut)
    if not backend.cuda_kernels or t.data.flags.c_contiguous:
        return t.data
    dense = backend.empty(tuple(t.shape), t.dtype)
    steps.append(copy_step(backend, t.data, dense, "dense NHWC copy for the pooling kernel"))
    return dense


def _result(node, backend, out, operands):
    """The plan's destination when the pooling is its root and may write it (no overlap with the
    operands; dense on CUDA, whose kernels write dense NHWC), else a temporary."""
    if (out is not None and (not backend.cuda_kernels or out.flags.c_contiguous)
            and not any(a is not None and may_overlap(out, a) for a in operands)):
        return out
    return backend.empty(tuple(node.shape), node.dtype)


def _finish(steps, backend, node, y, out):
    if out is not None and y is not out:
        steps.append(copy_step(backend, y, out, "copy the pooling's result into the destination"))
    return steps, _tensor.Tensor(y, node.device)


def build_pool(node, backend, cut, out):
    steps: list = []
    x = _operand(node.args[0], backend, cut, steps)
    y = _result(node, backend, out, (x,))
    steps.append(PoolStep(backend, "forward", node.attrs, x, None, y))
    return _finish(steps, backend, node, y, out)


def build_pool_backward(node, backend, cut, out):
    steps: list = []
    if node.op == "max_pool2d_backward":
        x = _operand(node.args[0], backend, cut, steps)
        g = _operand(node.args[1], backend, cut, steps)
    else:
        x, g = None, _operand(node.args[0], backend, cut, steps)
    dx = _result(node, backend, out, (x, g))
    a = node.attrs
    argmax = None
    if backend.cuda_kernels and "argmax" in _pool_cuda().backward_kernels(a.kind, dx.shape, g.shape, a.kernel,
                                                                         a.stride, a.padding):
        argmax = backend.empty(tuple(g.shape), np.uint8)
    steps.append(PoolStep(backend, "backward", node.attrs, x, g, dx, argmax))
    return _finish(steps, backend, node, dx, out)


def _pool_cuda():
    """The CUDA pooling kernels' renderer, imported on first use (it imports the CUDA C renderer)."""
    from lazytensor.kernels.cuda import pool as pool_cuda
    return pool_cuda
