"""Planning conv2d and batch_norm: the CBR (Conv + BatchNorm + ReLU) path.

Training, relu(batch_norm(conv2d(x, w)) [+ skip]):
  stage 1  conv and the per-channel statistics of its output: on CUDA either one cuDNN graph
           (conv_fprop + genstats) or the plain cuDNN conv followed by lazytensor's own statistics
           reduction, whichever measured faster for the shape; on the CPU, im2col + BLAS then the
           statistics reduction;
  stage 2  BN finalize over C channels (eq_scale, eq_bias, saved statistics, running statistics);
  stage 3  ONE generated elementwise kernel: apply, whatever elementwise work lies above
           (a residual add), ReLU, and the 1-bit ReLU mask.
Inference: eq_scale/eq_bias from the running statistics, then on CUDA one cuDNN graph
conv -> scale -> bias -> relu where cuDNN takes it, else conv + the fused epilogue kernel.
Every choice, and every reason the fused path was not taken, shows in lt.explain.
"""
from __future__ import annotations

import math

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import Expr, apply
from lazytensor.kernels.ops import OPS
from lazytensor.kernels.program import Reduction, with_relu_mask
from lazytensor.plan.lower import lower
from lazytensor.plan.planner import (HEAVY, PATTERNS, ROOT_WRITERS, aliased, copy_step, cutter, keep_evaluated,
                                     materialized, may_overlap)
from lazytensor.plan.conv.stage1 import choose_stage1, statistics_step
from lazytensor.reuse.replay import first_refusal
from lazytensor.plan.conv import saved_results
from lazytensor.plan.steps import FusedElementwise, FusedReduction, Learned
from lazytensor.cbr.conv_cpu import conv2d_nhwc
from lazytensor.cbr import finalize_cpu

_F32 = np.dtype(np.float32)


def _checked(dispatcher):
    """The CPU finalize kernels keep numba's cache files beside cbr/: checked like every kernel's
    (imported when they are first compiled, as numba is)."""
    from lazytensor.kernels.cpu.numba_cache import checked
    return checked(dispatcher)


finalize_cpu.prepare_dispatcher = _checked


# -- steps ---------------------------------------------------------------------------------------

class Conv2dStep:
    """y = conv2d(x, w): cuDNN on CUDA, im2col + BLAS on the CPU; optionally with genstats sums."""
    __slots__ = ("backend", "x", "w", "attrs", "out", "path", "sums", "note", "built")

    def __init__(self, backend, x, w, attrs, out, path, sums=None, note=""):
        self.backend, self.x, self.w, self.attrs, self.out = backend, x, w, attrs, out
        self.path, self.sums, self.note = path, sums, note
        self.built = Learned()    # the cuDNN graph the first run built and checked

    def run(self):
        graph = self.built.value
        if graph is not None:               # checked and built on an earlier run: the launch alone
            operands = [self.x.data.ptr, self.w.data.ptr, self.out.data.ptr]
            if self.sums is not None:
                operands += [v.data.ptr for v in self.sums]
            graph.relaunch(operands)
            return
        a = self.attrs
        if self.path == "cpu":
            conv2d_nhwc(self.x, self.w, a.stride, a.padding, a.dilation, out=self.out)
        elif self.path == "cudnn":
            from lazytensor.cbr import cudnn_conv
            cudnn_conv.conv2d(self.x, self.w, a.stride, a.padding, a.dilation, out=self.out)
            self.built.value = self._compiled("conv")
        elif self.path == "cudnn-genstats":
            from lazytensor.cbr import cudnn_conv
            total, total_sq = self.sums
            cudnn_conv.conv2d_genstats(self.x, self.w, a.stride, a.padding, a.dilation, out=self.out,
                                       sum_out=total, sum_sq_out=total_sq)
            self.built.value = self._compiled("conv_genstats")
        else:   # "host": cuDNN cannot take this conv; computed on the host and copied back
            import cupy
            y = conv2d_nhwc(cupy.asnumpy(self.x), cupy.asnumpy(self.w), a.stride, a.padding, a.dilation)
            self.out.set(y)

    def capture_refusal(self):
        if self.path.startswith("cudnn"):
            return None
        return f"the conv runs on the {'host' if self.path == 'host' else 'CPU'}"

    def _compiled(self, kind):
        from lazytensor.cbr.cudnn_conv import compiled_graph_for
        a = self.attrs
        return compiled_graph_for(kind, self.x.shape, self.w.shape, a.stride, a.padding, a.dilation,
                                  self.x.device.id)

    def describe(self, source: bool = True) -> str:
        what = {"cpu": "im2col + BLAS matmul (NumPy)", "cudnn": "cuDNN conv_fprop graph",
                "cudnn-genstats": "cuDNN conv_fprop + genstats graph (per-channel sum and sum of squares)",
                "host": "on the host: im2col + BLAS, copied back to the device"}[self.path]
        text = (f"Conv2d on {self.backend.name}: {self.x.shape} * {self.w.shape} -> {self.out.shape} "
                f"{self.out.dtype}, stride {self.attrs.stride}, padding {self.attrs.padding}, "
                f"dilation {self.attrs.dilation}: {what}")
        if self.path.startswith("cudnn") and source:
            from lazytensor.cbr.cudnn_conv import compiled_graph_for
            kind = "conv_genstats" if self.path == "cudnn-genstats" else "conv"
            try:
                compiled = compiled_graph_for(kind, self.x.shape, self.w.shape, self.attrs.stride,
                                              self.attrs.padding, self.attrs.dilation, self.x.device.id)
            except Exception:   # the graph kind names are the cbr package's; explain must not fail
                compiled = None
            if compiled is not None:
                text += "\n  plan: " + compiled.describe()
        if self.note:
            text += f"\n  note: {self.note}"
        return text


class FinalizeStep:
    """BN finalize over C channels: eq_scale, eq_bias, saved statistics, running statistics."""
    __slots__ = ("backend", "stats", "from_sums", "count", "vectors", "momentum", "eps", "outs", "training")

    def __init__(self, backend, stats, from_sums, count, vectors, momentum, eps, outs, training=True):
        self.backend, self.stats, self.from_sums, self.count = backend, stats, from_sums, count
        self.vectors, self.momentum, self.eps, self.outs, self.training = vectors, momentum, eps, outs, training

    def run(self):
        gamma, beta, rm, rv = self.vectors
        if not self.training:
            eq_scale, eq_bias = self.outs
            if self.backend.host_memory:
                finalize_cpu.finalize_inference(gamma, beta, rm, rv, self.eps, eq_scale, eq_bias)
            else:
                from lazytensor.cbr import finalize_cuda
                finalize_cuda.finalize_inference(gamma, beta, rm, rv, self.eps, eq_scale, eq_bias)
            return
        a, b = self.stats
        if self.backend.host_memory:      # the CPU statistics are always mean and variance
            finalize_cpu.finalize_train(a, b, float(self.count), gamma, beta, rm, rv, self.momentum,
                                        self.eps, *self.outs)
        else:
            from lazytensor.cbr import finalize_cuda
            finalize_cuda.finalize_train(a, b, self.from_sums, self.count, gamma, beta, rm, rv,
                                         self.momentum, self.eps, *self.outs)

    def capture_refusal(self):
        return None if self.backend.graphs else "the finalize runs on the CPU"

    def describe(self, source: bool = True) -> str:
        if not self.training:
            return (f"BatchNormFinalize (inference) on {self.backend.name}: eq_scale = gamma / sqrt(running_var + eps), "
                    f"eq_bias = beta - running_mean * eq_scale, over {self.vectors[0].shape[0]} channels")
        src = "cuDNN genstats sums" if self.from_sums else "the statistics reduction"
        return (f"BatchNormFinalize on {self.backend.name}: from {src} over {self.count} values per channel: "
                f"eq_scale, eq_bias, saved_mean, saved_inv_var, and the updated running statistics (momentum "
                f"{self.momentum}, unbiased running variance), staged until the plan's last step")


class CommitStep:
    """The plan's last step: the running statistics the finalize computed, into place; and the
    arrays saved for the backward pass (`written`) marked as holding a completed forward
    (lazytensor.plan.conv.saved_results)."""
    __slots__ = ("backend", "staged", "running", "written")
    # Arrays the step only marks, never reads: a plan without holders to hand them out (a recorded
    # step's, lazytensor.step.memory_plan) drops them rather than keep them alive until this last step.
    marks_only = ("written",)
    commits = True      # it writes the caller's state: it stays after every step that could fail

    def __init__(self, backend, staged, running, written=()):
        self.backend, self.staged, self.running, self.written = backend, staged, running, tuple(written)

    def run(self):
        if self.backend.host_memory:
            finalize_cpu.commit_running(*self.staged, *self.running)   # both in one call: never half
        else:
            from lazytensor.cbr import finalize_cuda
            finalize_cuda.commit_running(*self.staged, *self.running)
        saved_results.mark(self.written)

    def capture_refusal(self):
        return None if self.backend.graphs else "the commit runs on the CPU"

    def describe(self, source: bool = True) -> str:
        text = f"Commit: the updated running_mean and running_var ({self.running[0].shape[0]} channels)"
        if self.written:
            text += f"; the {len(self.written)} arrays saved for the backward pass now hold a completed forward"
        return text


class InferenceGraphStep:
    """relu(conv(x, w) * eq_scale + eq_bias) as one cuDNN graph; conv + the fused epilogue kernel
    where cuDNN rejects that graph for the shape (remembered, and shown by explain)."""
    __slots__ = ("backend", "x", "w", "attrs", "eq", "out", "fallback", "built")
    rejected: dict = {}   # (x shape, w shape, attrs) -> cuDNN's reason

    def __init__(self, backend, x, w, attrs, eq, out, fallback):
        self.backend, self.x, self.w, self.attrs, self.eq, self.out = backend, x, w, attrs, eq, out
        self.fallback = fallback      # steps: conv into a temporary, then the epilogue kernel into out
        self.built = Learned()    # the cuDNN graph the first run built and checked

    def _key(self):
        return (self.x.shape, self.w.shape, self.attrs)

    def run(self):
        graph = self.built.value
        if graph is not None:
            scale, bias = self.eq
            graph.relaunch([self.x.data.ptr, self.w.data.ptr, scale.data.ptr, bias.data.ptr, self.out.data.ptr])
            return
        if self._key() not in self.rejected:
            from lazytensor.cbr import cudnn_conv
            from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
            a = self.attrs
            try:
                cudnn_conv.conv2d_scale_bias_relu(self.x, self.w, *self.eq, a.stride, a.padding, a.dilation,
                                                  out=self.out)
                self.built.value = cudnn_conv.compiled_graph_for("conv_scale_bias_relu", self.x.shape, self.w.shape,
                                                                 a.stride, a.padding, a.dilation, self.x.device.id)
                return
            except CudnnGraphRejected as e:
                self.rejected[self._key()] = str(e)
        for step in self.fallback:
            step.run()

    def capture_refusal(self):
        return first_refusal(self.fallback) if self._key() in self.rejected else None

    def describe(self, source: bool = True) -> str:
        reason = self.rejected.get(self._key())
        if reason is None:
            return (f"CBR inference on cuda: one cuDNN graph conv_fprop -> mul(eq_scale) -> add(eq_bias) -> relu, "
                    f"{self.x.shape} * {self.w.shape} -> {self.out.shape} (if cuDNN rejects it: conv + epilogue kernel)")
        return (f"CBR inference on cuda: cuDNN rejected the single graph ({reason}); conv + fused epilogue kernel:\n"
                + "\n".join("    " + s.describe(source) for s in self.fallback))


# -- choices ---------------------------------------------------------------------------------------

def cudnn_refusal(x, w) -> str | None:
    """Why the cuDNN path cannot take this conv, or None."""
    from lazytensor.cbr.cudnn_support import cudnn_shape_refusal, cudnn_unavailable_reason
    return cudnn_unavailable_reason() or cudnn_shape_refusal(x.shape, w.shape, x.dtype)


def _contiguous(node, backend, steps, cut=None):
    """`node` as a C-contiguous Tensor. With the plan's cutter, evaluated (or copied) once per plan
    whatever number of steps read it (a layer's activation: the next conv and its wgrad; a gradient:
    the dBN sums and d(conv_out))."""
    kept = getattr(cut, "evaluated", {}).get(id(node))
    if kept is not None:
        return kept[1]
    t = materialized(node, backend, steps, cut)
    if t.data.flags.c_contiguous:
        return t
    tmp = backend.empty(t.shape, t.dtype)
    step = copy_step(backend, t.data, tmp, "contiguous copy for the convolution")
    steps.append(step)
    keep_evaluated(cut, node, tmp, step)
    return _tensor.Tensor(tmp, t.device)


def _conv_operands(conv, backend, cut, steps):
    x = _contiguous(cut(conv.args[0]), backend, steps, cut)
    w = _contiguous(cut(conv.args[1]), backend, steps, cut)
    return x, w


def _conv_step(backend, x, w, attrs, y, fused):
    if backend.host_memory:
        return Conv2dStep(backend, x.data, w.data, attrs, y, "cpu")
    why = cudnn_refusal(x, w)
    if why is None:
        return Conv2dStep(backend, x.data, w.data, attrs, y, "cudnn")
    if fused:
        raise ValueError(f"fused=True but the fused CBR path cannot run: {why}")
    from lazytensor.plan.conv.channel_padding import cudnn_after_padding, padded_forward
    if cudnn_after_padding(x.shape, w.shape, x.dtype):     # C=3 of a first layer, K=10 of a classifier
        return padded_forward(backend, x.data, w.data, attrs, y)
    return Conv2dStep(backend, x.data, w.data, attrs, y, "host", note=f"cuDNN path not taken: {why}")


def _build_conv2d(node, backend, cut, out):
    """The conv alone; as the plan's root it writes the destination itself when that is dense (the
    convolutions write dense NHWC) and shares no memory with x or w, else a temporary that a copy
    step moves into place."""
    steps: list = []
    x, w = _conv_operands(node, backend, cut, steps)
    # (the conv reads a window around each output: any overlap with its operands needs the temporary)
    dense = (out is not None and out.flags.c_contiguous
             and not any(may_overlap(out, a.data) for a in (x, w)))
    y = out if dense else backend.empty(tuple(node.shape), node.dtype)
    steps.append(_conv_step(backend, x, w, node.attrs, y, False))
    if out is not None and not dense:
        steps.append(copy_step(backend, y, out, "copy into the strided destination"))
    return steps, _tensor.Tensor(y, node.device)


def _build_batch_norm(node, backend, cut, out):
    a = node.attrs
    steps: list = []
    x_node = node.args[0]
    gamma, beta = (_contiguous(cut(v), backend, steps, cut) for v in node.args[1:3])
    rm, rv = node.args[3], node.args[4]
    channels = node.shape[-1]
    count = math.prod(node.shape[:-1])
    is_conv = isinstance(x_node, Expr) and x_node.op == "conv2d"
    memo = getattr(cut, "memo", None)
    if is_conv and not a.fused and memo is not None and id(x_node) in memo:
        is_conv = False     # the conv already ran for another reader of its output (a gradient rule): read it
    if a.fused and not is_conv:
        raise ValueError("fused=True needs batch_norm applied directly to conv2d(...)")
    # The small per-channel vectors of the plan (eq_scale, eq_bias, saved statistics, staged running
    # statistics, genstats sums) are rows of one allocation: one allocator call, not eight.
    # float64 activations keep float64 statistics and affine maps on the CPU, whose finalize kernel
    # takes any float type (a float64 training step then matches a float64 reference to 1e-10); the
    # CUDA finalize works in float32, as cuDNN's statistics do.
    stat = np.dtype(np.float64) if node.dtype == np.float64 and backend.host_memory else _F32
    rows = iter(backend.empty((8, channels), stat))
    eq = [next(rows), next(rows)]

    if is_conv:
        x, w = _conv_operands(x_node, backend, cut, steps)
        y = backend.empty(tuple(x_node.shape), x_node.dtype)
        conv = _conv_step(backend, x, w, x_node.attrs, y, a.fused)
        if memo is not None:    # a later reader of the conv's output (a gradient rule) reads y: one conv
            memo[id(x_node)] = _tensor.Tensor(y, node.device)
    else:
        y = _contiguous(cut(x_node), backend, steps, cut).data
        conv = None

    if not a.training:
        if conv is not None:
            steps.append(conv)
        steps.append(FinalizeStep(backend, None, False, count, (gamma.data, beta.data, rm.data, rv.data),
                                  a.momentum, a.eps, eq, training=False))
    else:
        saved = [next(rows), next(rows)]
        if conv is not None and conv.path == "cudnn":
            choice, times = choose_stage1(backend, x, w, x_node.attrs, y)
            a.saved.path = f"stage 1: {choice}" + (f" ({times})" if times else "")
        else:
            choice = "conv + statistics reduction"
            a.saved.path = f"stage 1: {'im2col + BLAS' if backend.host_memory else conv.path if conv else 'input'}" \
                           f" + statistics reduction"
        if choice == "conv_fprop + genstats":
            sums = [next(rows), next(rows)]
            steps.append(Conv2dStep(backend, x.data, w.data, x_node.attrs, y, "cudnn-genstats", sums,
                                    note=a.saved.path))
            stats, from_sums = sums, True
        else:
            if conv is not None:
                # keep the reason the cuDNN path was not taken (explain must show it)
                conv.note = "; ".join(n for n in (conv.note, a.saved.path) if n)
                steps.append(conv)
            reduction, st = statistics_step(backend, y, node.device, stat)
            steps.append(reduction)
            stats, from_sums = (st[0], st[1]), False
        # The finalize writes the updated running statistics to staging rows; the plan's very last
        # step commits them, so a failure anywhere before leaves running_mean/var untouched.
        staged = [next(rows), next(rows)]
        steps.append(FinalizeStep(backend, stats, from_sums, count, (gamma.data, beta.data, rm.data, rv.data),
                                  a.momentum, a.eps, eq + saved + staged))
        cut.deferred.append(CommitStep(backend, staged, (rm.data, rv.data), (saved[0], saved[1], y)))
        a.saved.saved_mean = _tensor.Tensor(saved[0], node.device)
        a.saved.saved_inv_var = _tensor.Tensor(saved[1], node.device)
        a.saved.conv_out = _tensor.Tensor(y, node.device)
        a.saved.relu_mask = None        # a relu above that writes one sets it (_relu_mask_plan)
        a.saved.released = False
        side = getattr(cut, "side", None)
        if side is not None:            # a backward in the same plan reads them (forward_saved nodes)
            side[id(node)] = {"saved_mean": a.saved.saved_mean, "saved_inv_var": a.saved.saved_inv_var}

    scale, bias = (_tensor.Tensor(v, node.device) for v in eq)
    applied = (_tensor.Tensor(y, node.device) * scale + bias).astype(node.dtype)
    return steps, applied


# -- whole-plan patterns -------------------------------------------------------------------------

def _training_bn_below(node):
    """The training batch_norm feeding `node` through elementwise ops only, or None."""
    while isinstance(node, Expr) and node.heavy:
        if node.op == "batch_norm":
            return node if node.attrs.training else None
        if node.op not in OPS and node.op != "astype":   # a reduction, a conv, any heavy op but elementwise
            return None
        nxt = [a for a in node.args if getattr(a, "heavy", False)]
        if len(nxt) != 1:
            return None
        node = nxt[0]
    return None


def _relu_mask_plan(root, out, backend):
    """relu(... batch_norm(...) ...) in training: the final kernel also writes the ReLU mask."""
    if root.op != "relu":
        return None
    bn = _training_bn_below(root.args[0])
    if bn is None:
        return None
    steps: list = []
    cut = cutter(steps, backend)
    final = cut(root)
    program, inputs, scalars = lower(final, out.dtype)
    target = out
    if not out.flags.c_contiguous or aliased(out, inputs):
        target = backend.empty(out.shape, out.dtype)
    mask = backend.empty(((target.size + 7) // 8,), np.dtype(np.uint8))
    steps.append(FusedElementwise(backend, with_relu_mask(program), target, inputs, scalars, mask=mask,
                                  note="BN apply + ReLU + 1-bit ReLU mask in one kernel"))
    if target is not out:
        steps.append(copy_step(backend, target, out, "copy into the destination"))
    bn.attrs.saved.relu_mask = _tensor.Tensor(mask, bn.device)
    for step in cut.deferred:       # the forward's commit step also marks the mask written
        if isinstance(step, CommitStep) and step.written and step.written[-1] is bn.attrs.saved.conv_out.data:
            step.written += (mask,)
    return steps + cut.deferred


def _inference_graph_plan(root, out, backend):
    """relu(batch_norm(conv2d(x, w), training=False)) on CUDA: try the single cuDNN graph."""
    if not backend.cudnn or root.op != "relu":
        return None
    bn = root.args[0]
    if not (isinstance(bn, Expr) and bn.op == "batch_norm" and not bn.attrs.training):
        return None
    conv = bn.args[0]
    if not (isinstance(conv, Expr) and conv.op == "conv2d") or out.dtype != np.float16:
        return None
    if not out.flags.c_contiguous:
        return None
    steps: list = []
    cut = cutter(steps, backend)
    x, w = _conv_operands(conv, backend, cut, steps)
    if cudnn_refusal(x, w) is not None:
        return None
    gamma, beta = (_contiguous(cut(v), backend, steps, cut) for v in bn.args[1:3])
    rm, rv = bn.args[3], bn.args[4]
    eq = [backend.empty((bn.shape[-1],), _F32) for _ in range(2)]
    steps.append(FinalizeStep(backend, None, False, 0, (gamma.data, beta.data, rm.data, rv.data),
                              bn.attrs.momentum, bn.attrs.eps, eq, training=False))
    y = backend.empty(tuple(conv.shape), conv.dtype)
    scale, bias = (_tensor.Tensor(v, bn.device) for v in eq)
    epilogue = (_tensor.Tensor(y, bn.device) * scale + bias).astype(bn.dtype)
    program, inputs, scalars = lower(apply("relu", epilogue), out.dtype)
    fallback = [Conv2dStep(backend, x.data, w.data, conv.attrs, y, "cudnn"),
                FusedElementwise(backend, program, out, inputs, scalars, note="BN apply + ReLU epilogue")]
    steps.append(InferenceGraphStep(backend, x.data, w.data, conv.attrs, eq, out, fallback))
    return steps


HEAVY["conv2d"] = _build_conv2d
ROOT_WRITERS.add("conv2d")
HEAVY["batch_norm"] = _build_batch_norm
PATTERNS.append(("cbr inference: one cuDNN graph", _inference_graph_plan))
PATTERNS.append(("cbr training: apply + relu + mask in one kernel", _relu_mask_plan))
