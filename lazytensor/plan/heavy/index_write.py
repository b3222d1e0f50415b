"""Planning an "index_write" node (lazytensor.ops.index_write: y with y[idx] = e applied): ONE scatter
kernel that computes e's elementwise expression over the value shape (len(idx),) + y.shape[1:] and
stores each element into its row of the result (kernels/cpu/index_write.py, index_write_cuda.py).

The result is the plan's destination when the node is the root. When that destination is y itself
(`y[idx] = e`), y's other rows are already in place and the scatter is the whole plan; otherwise y
is copied in first. Where e reads the memory being written (`y[idx] = y[0] * 2`), e is evaluated
into a temporary first, as NumPy evaluates the right side before writing."""
from __future__ import annotations

from lazytensor.core.memory import address
from lazytensor.core.tensor import Tensor
from lazytensor.kernels import launch_log
from lazytensor.kernels.program import describe
from lazytensor.core.memory import may_overlap
from lazytensor.plan.elementwise import copy_step
from lazytensor.plan.evaluated import materialized
from lazytensor.plan.lower import lower
from lazytensor.plan.steps import Step


def _runner(backend):
    if not backend.cuda_kernels:
        from lazytensor.kernels.cpu import index_write as module
    else:
        from lazytensor.kernels.cuda import index_write as module
    return module


class FusedScatter(Step):
    """out[index] = the program's values over value_shape, one kernel."""
    __slots__ = ("backend", "program", "out", "index", "inputs", "scalars", "value_shape", "note", "from_out")

    def __init__(self, backend, program, out, index, inputs, scalars, value_shape, note="", from_out=()):
        self.backend, self.program, self.out, self.index = backend, program, out, index
        self.inputs, self.scalars, self.value_shape, self.note = inputs, scalars, value_shape, note
        self.from_out = from_out    # inputs read as out[index[j], ...] (the rows being written), not in[j, ...]

    def run(self):
        _runner(self.backend).run_index_write(self.backend, self.program, self.out, self.index, self.inputs,
                                              self.scalars, self.value_shape, self.from_out)

    def describe(self, source: bool = True) -> str:
        head = (f"FusedScatter on {self.backend.name}: out[index] = values, {self.index.shape[0]} rows of "
                f"{self.out.shape} {self.out.dtype}; the values' elementwise expression ({self.program.n_inputs} "
                f"array inputs) computed inside the scatter kernel over {self.value_shape}")
        if self.note:
            head += f"\n  note: {self.note}"
        text = head + "\n" + "\n".join("    " + line for line in describe(self.program).splitlines())
        if source:
            explained = _runner(self.backend).explain_index_write(self.backend, self.program, self.out, self.index,
                                                                  self.inputs, self.value_shape, self.from_out)
            text += "\n" + "\n".join("    " + line for line in explained.splitlines())
        return text


def _same_array(a, b) -> bool:
    return a is b or (a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
                      and address(a) == address(b))


def build_index_write(node, backend, cut, out):
    steps: list = []
    base = cut(node.args[0])
    value = cut(node.args[1])
    index = materialized(cut(node.args[2]), backend, steps, cut, shared=False).data
    target = out if out is not None else backend.empty(tuple(node.shape), node.dtype)
    value_shape = (index.shape[0],) + tuple(node.shape[1:])
    note = ""
    if any(may_overlap(leaf.data, target) for leaf in value.leaves):
        tmp = backend.empty(value_shape, node.dtype)
        written = cut.plan(value, tmp, backend)
        written[-1].note = "the values read the memory being written: evaluated into a temporary first"
        steps += written
        value, note = Tensor(tmp, node.device), "scatters the values' temporary"
    if not (type(base) is Tensor and _same_array(base.data, target)):
        copied = cut.plan(base, target, backend)
        copied[-1].note = "the rows the scatter does not write: the indexed tensor copied into the result"
        steps += copied
    program, inputs, scalars = lower(value, node.dtype)
    from_out = ()
    if node.attrs is not None:      # `y[idx] += e`: the values read y[idx], which the kernel reads from out's rows
        placeholder = node.attrs.placeholder.data
        from_out = tuple(k for k, a in enumerate(inputs) if a is placeholder)
        inputs = [target if a is placeholder else a for a in inputs]
        note = "the values read the rows they overwrite: each element read from the result just before it is written"
    steps.append(FusedScatter(backend, program, target, index, inputs, scalars, value_shape, note, from_out))
    return steps, Tensor(target, node.device)


class RowGather(Step):
    """out[...] = x[index] along the first axis, by the device's array library (take)."""
    __slots__ = ("backend", "x", "index", "out")

    def __init__(self, backend, x, index, out):
        self.backend, self.x, self.index, self.out = backend, x, index, out

    def run(self):
        xp = _library(self.backend)
        self.out[...] = xp.take(self.x, self.index, axis=0)
        if launch_log.listeners:
            launch_log.record(launch_log.KernelRecord("row_gather", self.backend.name, "gather", int(self.out.size),
                                                      "memory", 0.0, "array library"))

    def capture_refusal(self):
        return "a row gather runs in the array library, which allocates its result on every call"

    def describe(self, source: bool = True) -> str:
        library = "NumPy" if self.backend.host_memory else "CuPy"
        return (f"RowGather on {self.backend.name}: x[index] of {self.x.shape} {self.x.dtype} -> {self.out.shape}, "
                f"by {library}'s take")


class RowScatterAdd(Step):
    """out[...] = 0; out[index] += g, repeated rows adding up (np.add.at): the gradient of a row gather."""
    __slots__ = ("backend", "g", "index", "out")

    def __init__(self, backend, g, index, out):
        self.backend, self.g, self.index, self.out = backend, g, index, out

    def run(self):
        self.out[...] = 0
        if self.backend.host_memory:
            import numpy
            numpy.add.at(self.out, self.index, self.g)
        else:
            import cupyx
            cupyx.scatter_add(self.out, self.index, self.g)
        if launch_log.listeners:
            launch_log.record(launch_log.KernelRecord("row_scatter_add", self.backend.name, "scatter",
                                                      int(self.out.size), "memory", 0.0, "array library"))

    def capture_refusal(self):
        return "a scatter-add runs in the array library (np.add.at, cupyx.scatter_add)"

    def describe(self, source: bool = True) -> str:
        library = "np.add.at" if self.backend.host_memory else "cupyx.scatter_add"
        return (f"RowScatterAdd on {self.backend.name}: zeros of {self.out.shape} {self.out.dtype} with g "
                f"{self.g.shape} added into the indexed rows, repeats adding up, by {library} (the gradient of "
                f"a row gather)")


def _library(backend):
    if backend.host_memory:
        import numpy
        return numpy
    import cupy
    return cupy


def build_row_op(node, backend, cut, out):
    steps: list = []
    x = materialized(cut(node.args[0]), backend, steps, cut, shared=False).data
    index = node.args[1].data
    target = out
    if out is None or may_overlap(out, x):
        target = backend.empty(tuple(node.shape), node.dtype)
    step = RowGather if node.op == "row_gather" else RowScatterAdd
    steps.append(step(backend, x, index, target))
    if out is not None and target is not out:
        steps.append(copy_step(backend, target, out, "the operand overlaps the destination: written into a "
                                                     "temporary, copied here"))
    return steps, Tensor(target, node.device)

