"""Planning the backward convolutions: conv2d_backward_data (dgrad) and conv2d_backward_filter (wgrad).

Each is one step, like the forward conv alone (lazytensor.plan.conv.cbr._build_conv2d): on the CPU
per-tap BLAS (cbr/conv_cpu.py); on CUDA a cuDNN frontend conv_dgrad / conv_wgrad graph, cached per
shape like the forward graphs, with its plan from the experience tables, timing or cuDNN's heuristic
(cbr/cudnn_cache.py); where cuDNN cannot take the call (not float16, channels not a multiple of 8, no
cuDNN, or cuDNN rejecting the graph) on the host, which explain says, with the reason. The step
writes the plan's destination itself when that is dense and shares no memory with its operands.
"""
from __future__ import annotations

from lazytensor.core import tensor as _tensor
from lazytensor.plan.conv.cbr import _contiguous
from lazytensor.plan.planner import HEAVY, ROOT_WRITERS, copy_step, may_overlap
from lazytensor.plan.steps import Learned
from lazytensor.cbr.conv_cpu import conv2d_backward_data_nhwc, conv2d_backward_filter_nhwc

FIRST_LAYER_NOTE = "first layer: x is not among the inputs of the gradient, so no dgrad is planned"

# kind -> (what explain calls it, the cuDNN graph kind, the CPU function)
_KINDS = {
    "dgrad": ("dgrad: dx = conv2d_backward_data(dy, w)", "conv_dgrad", conv2d_backward_data_nhwc),
    "wgrad": ("wgrad: dw = conv2d_backward_filter(x, dy)", "conv_wgrad", conv2d_backward_filter_nhwc),
}


class ConvBackwardStep:
    """dgrad (a = dy, b = w, out = dx) or wgrad (a = x, b = dy, out = dw): a cuDNN graph on CUDA,
    per-tap BLAS on the CPU or on the host. `x_shape`/`w_shape` are the forward conv's."""
    __slots__ = ("backend", "kind", "a", "b", "x_shape", "w_shape", "attrs", "out", "path", "note", "built")
    rejected: dict = {}   # (kind, x shape, w shape, attrs) -> why cuDNN rejected the graph: run on the host

    def __init__(self, backend, kind, a, b, x_shape, w_shape, attrs, out, path, note=""):
        self.backend, self.kind, self.a, self.b, self.attrs, self.out = backend, kind, a, b, attrs, out
        self.x_shape, self.w_shape, self.path, self.note = x_shape, w_shape, path, note
        self.built = Learned()    # the cuDNN graph the first run built

    def _key(self):
        return (self.kind, self.x_shape, self.w_shape, self.attrs)

    def _args(self, a, b):
        at = self.attrs
        shape = self.x_shape if self.kind == "dgrad" else self.w_shape
        return (a, b, shape, at.stride, at.padding, at.dilation)

    def run(self):
        graph = self.built.value
        if graph is not None:       # built on an earlier run: the launch alone
            graph.relaunch([self.a.data.ptr, self.b.data.ptr, self.out.data.ptr])
            return
        _, graph_kind, cpu_function = _KINDS[self.kind]
        if self.path == "cpu":
            cpu_function(*self._args(self.a, self.b), out=self.out)
            return
        if self.path == "cudnn" and self._key() not in self.rejected:
            from lazytensor.cbr import cudnn_conv_backward
            from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
            run = cudnn_conv_backward.conv2d_dgrad if self.kind == "dgrad" else cudnn_conv_backward.conv2d_wgrad
            try:
                run(*self._args(self.a, self.b), out=self.out)
                at = self.attrs
                self.built.value = cudnn_conv_backward.compiled_backward_graph_for(
                    graph_kind, self.x_shape, self.w_shape, at.stride, at.padding, at.dilation, self.a.device.id)
                return
            except CudnnGraphRejected as e:
                self.rejected[self._key()] = e.reason
        import cupy         # on the host: cuDNN cannot take this call
        result = cpu_function(*self._args(cupy.asnumpy(self.a), cupy.asnumpy(self.b)))
        self.out.set(result)

    def _on_host(self) -> bool:
        return self.path == "host" or (self.path == "cudnn" and self._key() in self.rejected)

    def capture_refusal(self):
        if self.path == "cpu":
            return "the backward conv runs on the CPU"
        return f"the {self.kind} runs on the host" if self._on_host() else None

    def describe(self, source: bool = True) -> str:
        what, graph_kind, _ = _KINDS[self.kind]
        if self.path == "cpu":
            how = "one BLAS matmul per window tap (NumPy)"
        elif self._on_host():
            why = self.rejected.get(self._key())
            how = "on the host: one BLAS matmul per window tap, copied back to the device"
            if why is not None:
                how += f" (cuDNN rejected the {graph_kind} graph: {why})"
        else:
            how = f"cuDNN {graph_kind} graph"
        text = (f"ConvBackward on {self.backend.name}, {what}: {self.a.shape}, {self.b.shape} -> {self.out.shape} "
                f"{self.out.dtype}, stride {self.attrs.stride}, padding {self.attrs.padding}, dilation "
                f"{self.attrs.dilation}: {how}")
        if self.path == "cudnn" and not self._on_host() and source:
            from lazytensor.cbr.cudnn_conv_backward import compiled_backward_graph_for
            try:
                compiled = compiled_backward_graph_for(graph_kind, self.x_shape, self.w_shape, self.attrs.stride,
                                                       self.attrs.padding, self.attrs.dilation, self.a.device.id)
            except Exception:   # explain must not fail over a graph that was never built
                compiled = None
            if compiled is not None:
                text += "\n  plan: " + compiled.describe()
        if self.note:
            text += f"\n  note: {self.note}"
        return text


def backward_path(backend, x_shape, w_shape, dtype):
    """(path, note): "cpu", "cudnn", or "host" with the reason cuDNN cannot take the call."""
    if backend.host_memory:
        return "cpu", ""
    from lazytensor.cbr.cudnn_support import cudnn_shape_refusal, cudnn_unavailable_reason
    why = cudnn_unavailable_reason() or cudnn_shape_refusal(x_shape, w_shape, dtype)
    return ("cudnn", "") if why is None else ("host", f"cuDNN path not taken: {why}")


def backward_step(backend, kind, a, b, x_shape, w_shape, attrs, out, path, note=""):
    """A ConvBackwardStep; where cuDNN refuses the conv for its channel counts alone, the same on
    zero-padded channels (lazytensor.plan.conv.channel_padding) instead of on the host."""
    from lazytensor.plan.conv.channel_padding import cudnn_after_padding, padded_backward
    if path == "host" and cudnn_after_padding(x_shape, w_shape, a.dtype):
        return padded_backward(backend, kind, a, b, x_shape, w_shape, attrs, out, note=getattr(attrs, "note", ""))
    return ConvBackwardStep(backend, kind, a, b, x_shape, w_shape, attrs, out, path, note)


def _build(kind):
    def build(node, backend, cut, out):
        steps: list = []
        a, b = (_contiguous(cut(arg), backend, steps, cut) for arg in node.args)
        if kind == "dgrad":
            x_shape, w_shape = tuple(node.shape), tuple(b.shape)
        else:
            x_shape, w_shape = tuple(a.shape), tuple(node.shape)
        path, note = backward_path(backend, x_shape, w_shape, node.dtype)
        note = "; ".join(n for n in (note, getattr(node.attrs, "note", "")) if n)
        # (the step reads windows of its operands: any overlap with them needs the temporary)
        dense = (out is not None and out.flags.c_contiguous
                 and not any(may_overlap(out, t.data) for t in (a, b)))
        result = out if dense else backend.empty(tuple(node.shape), node.dtype)
        steps.append(backward_step(backend, kind, a.data, b.data, x_shape, w_shape, node.attrs, result, path, note))
        if out is not None and not dense:
            steps.append(copy_step(backend, result, out, "copy into the strided destination"))
        return steps, _tensor.Tensor(result, node.device)
    return build


HEAVY["conv2d_backward_data"] = _build("dgrad")
HEAVY["conv2d_backward_filter"] = _build("wgrad")
ROOT_WRITERS.update(("conv2d_backward_data", "conv2d_backward_filter"))
