"""Planning the backward convolutions: conv2d_backward_data (dgrad) and conv2d_backward_filter (wgrad).

Each is one step, like the forward conv alone (lazytensor.plan.conv.cbr.build_conv2d): on the CPU
per-tap BLAS (cbr/conv_cpu.py); on CUDA a cuDNN frontend conv_dgrad / conv_wgrad graph, cached per
shape like the forward graphs, with its plan from the experience tables, timing or cuDNN's heuristic
(cbr/cudnn_cache.py); where cuDNN cannot take the call (a dtype it has no engine for, no
cuDNN, or cuDNN rejecting the graph) an UnsupportedOnDevice error, or with lt.config.allow_host on
the host, which explain says, with the reason. The step
writes the plan's destination itself when that is dense and shares no memory with its operands.
"""
from __future__ import annotations

from lazytensor.core import tensor as _tensor
from lazytensor.kernels.config import host_or_raise
from lazytensor.core.memory import may_overlap
from lazytensor.plan.conv.channel_padding import cudnn_after_padding, padded_backward
from lazytensor.plan.conv.operands import contiguous
from lazytensor.plan.conv.steps import ConvBackwardStep
from lazytensor.plan.elementwise import copy_step

FIRST_LAYER_NOTE = "first layer: x is not among the inputs of the gradient, so no dgrad is planned"

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
    if path == "host":
        if cudnn_after_padding(x_shape, w_shape, a.dtype):
            return padded_backward(backend, kind, a, b, x_shape, w_shape, attrs, out, note=getattr(attrs, "note", ""))
        from lazytensor.cbr.cudnn_support import cudnn_fix, cudnn_shape_refusal, cudnn_unavailable_reason
        why = cudnn_unavailable_reason() or cudnn_shape_refusal(x_shape, w_shape, a.dtype)
        host_or_raise(f"the {kind} of the conv of x {tuple(x_shape)} by w {tuple(w_shape)} ({a.dtype})",
                      f"cuDNN cannot take it: {why}", cudnn_fix(a.dtype))
    return ConvBackwardStep(backend, kind, a, b, x_shape, w_shape, attrs, out, path, note)


def _build(kind):
    def build(node, backend, cut, out):
        steps: list = []
        a, b = (contiguous(cut(arg), backend, steps, cut) for arg in node.args)
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


build_dgrad = _build("dgrad")
build_wgrad = _build("wgrad")
