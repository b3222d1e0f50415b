"""Planning an "index_write" node (lazytensor.ops.index_write: y with y[idx] = e applied): ONE scatter
kernel that computes e's elementwise expression over the value shape (len(idx),) + y.shape[1:] and
stores each element into its row of the result (kernels/index_write_cpu.py, index_write_cuda.py).

The result is the plan's destination when the node is the root. When that destination is y itself
(`y[idx] = e`), y's other rows are already in place and the scatter is the whole plan; otherwise y
is copied in first. Where e reads the memory being written (`y[idx] = y[0] * 2`), e is evaluated
into a temporary first, as NumPy evaluates the right side before writing."""
from __future__ import annotations

from lazytensor.core.memory import address
from lazytensor.core.tensor import Tensor
from lazytensor.kernels.program import describe
from lazytensor.plan import planner
from lazytensor.plan.lower import lower


def _runner(backend):
    if backend.name == "cpu":
        from lazytensor.kernels import index_write_cpu as module
    else:
        from lazytensor.kernels import index_write_cuda as module
    return module


class FusedScatter:
    """out[index] = the program's values over value_shape, one kernel."""
    __slots__ = ("backend", "program", "out", "index", "inputs", "scalars", "value_shape", "note")

    def __init__(self, backend, program, out, index, inputs, scalars, value_shape, note=""):
        self.backend, self.program, self.out, self.index = backend, program, out, index
        self.inputs, self.scalars, self.value_shape, self.note = inputs, scalars, value_shape, note

    def run(self):
        _runner(self.backend).run_index_write(self.backend, self.program, self.out, self.index, self.inputs,
                                              self.scalars, self.value_shape)

    def capture_refusal(self):
        return None if self.backend.name == "cuda" else f"the {self.backend.name} backend has no graphs"

    def describe(self, source: bool = True) -> str:
        head = (f"FusedScatter on {self.backend.name}: out[index] = values, {self.index.shape[0]} rows of "
                f"{self.out.shape} {self.out.dtype}; the values' elementwise expression ({self.program.n_inputs} "
                f"array inputs) computed inside the scatter kernel over {self.value_shape}")
        if self.note:
            head += f"\n  note: {self.note}"
        text = head + "\n" + "\n".join("    " + line for line in describe(self.program).splitlines())
        if source:
            explained = _runner(self.backend).explain_index_write(self.backend, self.program, self.out, self.index,
                                                                  self.inputs, self.value_shape)
            text += "\n" + "\n".join("    " + line for line in explained.splitlines())
        return text


def _same_array(a, b) -> bool:
    return a is b or (a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
                      and address(a) == address(b))


def _build_index_write(node, backend, cut, out):
    steps: list = []
    base = cut(node.args[0])
    value = cut(node.args[1])
    index = planner.materialized(cut(node.args[2]), backend, steps).data
    target = out if out is not None else backend.empty(tuple(node.shape), node.dtype)
    value_shape = (index.shape[0],) + tuple(node.shape[1:])
    note = ""
    if any(planner.may_overlap(leaf.data, target) for leaf in value.leaves):
        tmp = backend.empty(value_shape, node.dtype)
        written = planner.plan(value, tmp, backend)
        written[-1].note = "the values read the memory being written: evaluated into a temporary first"
        steps += written
        value, note = Tensor(tmp, node.device), "scatters the values' temporary"
    if not (type(base) is Tensor and _same_array(base.data, target)):
        copied = planner.plan(base, target, backend)
        copied[-1].note = "the rows the scatter does not write: the indexed tensor copied into the result"
        steps += copied
    program, inputs, scalars = lower(value, node.dtype)
    steps.append(FusedScatter(backend, program, target, index, inputs, scalars, value_shape, note))
    return steps, Tensor(target, node.device)


planner.HEAVY["index_write"] = _build_index_write
planner.ROOT_WRITERS.add("index_write")
