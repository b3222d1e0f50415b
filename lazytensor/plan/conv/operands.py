"""The operands of convolution and batch-norm steps: C-contiguous tensors, evaluated or copied once
per plan whatever number of steps read them."""
from __future__ import annotations

from lazytensor.core import tensor as _tensor
from lazytensor.plan.elementwise import copy_step
from lazytensor.plan.evaluated import keep_evaluated, materialized


def contiguous(node, backend, steps, cut, shared=True):
    """`node` as a C-contiguous Tensor. With the plan's cutter, evaluated (or copied) once per plan
    whatever number of steps read it (a layer's activation: the next conv and its wgrad; a gradient:
    the dBN sums and d(conv_out)). shared=False: a temporary of the caller's own (materialized's)."""
    kept = getattr(cut, "evaluated", {}).get(id(node)) if shared else None
    if kept is not None:
        return kept[1]
    t = materialized(node, backend, steps, cut, shared)
    if t.data.flags.c_contiguous:
        return t
    tmp = backend.empty(t.shape, t.dtype)
    step = copy_step(backend, t.data, tmp, "contiguous copy for the convolution")
    steps.append(step)
    if shared:
        keep_evaluated(cut, node, tmp, step)
    return _tensor.Tensor(tmp, t.device)


def conv_operands(conv, backend, cut, steps):
    x = contiguous(cut(conv.args[0]), backend, steps, cut)
    w = contiguous(cut(conv.args[1]), backend, steps, cut)
    return x, w
