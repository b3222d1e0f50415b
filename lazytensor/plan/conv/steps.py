"""The steps of convolution and batch-norm plans (lazytensor.plan.conv.cbr, conv_backward,
channel_padding): cuDNN graphs on CUDA, im2col or per-tap BLAS on the CPU or on the host, the BN
finalize and the commit of the running statistics."""
from __future__ import annotations

from lazytensor.cbr import finalize_cpu, finalize_numpy
from lazytensor.cbr.conv_cpu import conv2d_backward_data_nhwc, conv2d_backward_filter_nhwc, conv2d_nhwc
from lazytensor.kernels.config import config, host_or_raise
from lazytensor.kernels.cpu.blas_threads import single_threaded_blas
from lazytensor.plan.conv import saved_results
from lazytensor.plan.steps import Learned, Step, first_refusal


def _checked(dispatcher):
    """The CPU finalize kernels keep numba's cache files beside cbr/: checked like every kernel's
    (imported when they are first compiled, as numba is)."""
    from lazytensor.kernels.cpu.numba_cache import checked
    return checked(dispatcher)


finalize_cpu.prepare_dispatcher = _checked


def _host_finalize():
    """The CPU finalize: numba's loops where calls wait for compiled kernels (LAZYTENSOR_JIT_WAIT=1),
    else their NumPy twin (cbr/finalize_numpy.py, the same bits): three loops over C channels are
    not worth a compile the first training step would wait for."""
    from lazytensor.kernels.background_compile import wait_for_compiler
    return finalize_cpu if wait_for_compiler() else finalize_numpy


def conv_tf32(dtype) -> bool:
    """Whether a conv of this dtype planned now may run on TF32 engines (float32 and
    lt.config.conv_allow_tf32): fixed in the step, so a kept plan keeps its math."""
    from lazytensor.cbr.cudnn_dtypes import uses_tf32
    return uses_tf32(dtype, config.conv_allow_tf32)


def math_note(dtype, tf32) -> str:
    from lazytensor.cbr.cudnn_dtypes import math_words
    return f"math: {math_words(dtype, tf32)}"


def host_fallback(op, reason, fix=""):
    """A cuDNN graph rejected at a step's first run: UnsupportedOnDevice, or with lt.config.allow_host
    a one-time warning (the step then computes on the host)."""
    host_or_raise(op, reason, fix or "cast the operands to float16 or float32 (x.astype(lt.float32))")


class Conv2dStep(Step):
    """y = conv2d(x, w): cuDNN on CUDA, im2col + BLAS on the CPU; optionally with genstats sums.
    "host" (cuDNN cannot take the conv, lt.config.allow_host): on the host, copied back."""
    __slots__ = ("backend", "x", "w", "attrs", "out", "path", "sums", "note", "built", "tf32")
    writes = ("out", "sums")
    # (x shape, w shape, dtype, tf32, attrs) -> why cuDNN rejected the conv graph: with
    # lt.config.allow_host on the host, else UnsupportedOnDevice
    rejected: dict = {}

    def __init__(self, backend, x, w, attrs, out, path, sums=None, note=""):
        self.backend, self.x, self.w, self.attrs, self.out = backend, x, w, attrs, out
        self.path, self.sums, self.note = path, sums, note
        self.built = Learned()    # the cuDNN graph the first run built and checked
        self.tf32 = conv_tf32(x.dtype)

    def _key(self):
        return (self.x.shape, self.w.shape, self.x.dtype.name, self.tf32, self.attrs)

    def _rejection(self):
        return self.rejected.get(self._key()) if self.path == "cudnn" else None

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
            with single_threaded_blas():
                conv2d_nhwc(self.x, self.w, a.stride, a.padding, a.dilation, out=self.out)
            return
        why = self._rejection()
        if self.path.startswith("cudnn") and why is None:
            from lazytensor.cbr import cudnn_conv
            from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
            try:
                if self.path == "cudnn":
                    cudnn_conv.conv2d(self.x, self.w, a.stride, a.padding, a.dilation, out=self.out, tf32=self.tf32)
                    self.built.value = self._compiled("conv")
                else:
                    total, total_sq = self.sums
                    cudnn_conv.conv2d_genstats(self.x, self.w, a.stride, a.padding, a.dilation, out=self.out,
                                               sum_out=total, sum_sq_out=total_sq, tf32=self.tf32)
                    self.built.value = self._compiled("conv_genstats")
                return
            except CudnnGraphRejected as e:
                if self.sums is not None:   # the genstats graph: its sums have no host form here
                    raise
                why = self.rejected[self._key()] = e.reason
        if why is not None:
            host_fallback(f"conv2d of x {self.x.shape} {self.x.dtype} by w {self.w.shape}",
                          f"cuDNN rejected the graph ({why})")
        # "host" (or a graph cuDNN rejected), with lt.config.allow_host: on the host, copied back
        import cupy
        y = conv2d_nhwc(cupy.asnumpy(self.x), cupy.asnumpy(self.w), a.stride, a.padding, a.dilation)
        self.out.set(y)

    def capture_refusal(self):
        if self.path.startswith("cudnn") and self._rejection() is None:
            return None
        return f"the conv runs on the {'CPU' if self.path == 'cpu' else 'host'}"

    def _compiled(self, kind):
        from lazytensor.cbr.cudnn_conv import compiled_graph_for
        a = self.attrs
        return compiled_graph_for(kind, self.x.shape, self.w.shape, a.stride, a.padding, a.dilation,
                                  self.x.device.id, dtype=self.x.dtype, tf32=self.tf32)

    def describe(self, source: bool = True) -> str:
        what = {"cpu": "im2col + BLAS matmul (NumPy)", "cudnn": "cuDNN conv_fprop graph",
                "cudnn-genstats": "cuDNN conv_fprop + genstats graph (per-channel sum and sum of squares)",
                "host": "on the host (lt.config.allow_host): im2col + BLAS, copied back to the device"}[self.path]
        rejected = self._rejection()
        if rejected is not None:
            what = f"on the host (lt.config.allow_host): cuDNN rejected the graph ({rejected}), copied back"
        text = (f"Conv2d on {self.backend.name}: {self.x.shape} * {self.w.shape} -> {self.out.shape} "
                f"{self.out.dtype}, stride {self.attrs.stride}, padding {self.attrs.padding}, "
                f"dilation {self.attrs.dilation}: {what}")
        if self.path.startswith("cudnn") and rejected is None:
            text += f"; {math_note(self.x.dtype, self.tf32)}"
        if self.path.startswith("cudnn") and rejected is None and source:
            kind = "conv_genstats" if self.path == "cudnn-genstats" else "conv"
            try:
                compiled = self._compiled(kind)
            except Exception:   # the graph kind names are the cbr package's; explain must not fail
                compiled = None
            if compiled is not None:
                text += "\n  plan: " + compiled.describe()
        if self.note:
            text += f"\n  note: {self.note}"
        return text


class FinalizeStep(Step):
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
                _host_finalize().finalize_inference(gamma, beta, rm, rv, self.eps, eq_scale, eq_bias)
            else:
                from lazytensor.cbr import finalize_cuda
                finalize_cuda.finalize_inference(gamma, beta, rm, rv, self.eps, eq_scale, eq_bias)
            return
        a, b = self.stats
        if self.backend.host_memory:      # the CPU statistics are always mean and variance
            _host_finalize().finalize_train(a, b, float(self.count), gamma, beta, rm, rv, self.momentum,
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


class CommitStep(Step):
    """The plan's last step: the running statistics the finalize computed, into place; and the
    arrays saved for the backward pass (`written`) marked as holding a completed forward
    (lazytensor.plan.conv.saved_results)."""
    __slots__ = ("backend", "staged", "running", "written")
    writes = ("running",)
    # Arrays the step only marks, never reads: a plan without holders to hand them out (a recorded
    # step's, lazytensor.step.memory_plan) drops them rather than keep them alive until this last step.
    marks_only = ("written",)
    commits = True      # it writes the caller's state: it stays after every step that could fail

    def __init__(self, backend, staged, running, written=()):
        self.backend, self.staged, self.running, self.written = backend, staged, running, tuple(written)

    def run(self):
        if self.backend.host_memory:
            finalize = _host_finalize()
            if finalize is finalize_cpu:
                finalize_cpu.commit_running(*self.staged, *self.running)   # both in one call: never half
            else:
                from lazytensor.kernels.cpu.numba_import import interrupts_held
                with interrupts_held():                                    # (two copies: never half)
                    finalize_numpy.commit_running(*self.staged, *self.running)
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


class InferenceGraphStep(Step):
    """relu(conv(x, w) * eq_scale + eq_bias) as one cuDNN graph; conv + the fused epilogue kernel
    where cuDNN rejects that graph for the shape (remembered, and shown by explain)."""
    __slots__ = ("backend", "x", "w", "attrs", "eq", "out", "fallback", "built", "tf32")
    rejected: dict = {}   # (x shape, w shape, dtype, tf32, attrs) -> cuDNN's reason

    def __init__(self, backend, x, w, attrs, eq, out, fallback):
        self.backend, self.x, self.w, self.attrs, self.eq, self.out = backend, x, w, attrs, eq, out
        self.fallback = fallback      # steps: conv into a temporary, then the epilogue kernel into out
        self.built = Learned()    # the cuDNN graph the first run built and checked
        self.tf32 = conv_tf32(x.dtype)

    def _key(self):
        return (self.x.shape, self.w.shape, self.x.dtype.name, self.tf32, self.attrs)

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
                                                  out=self.out, tf32=self.tf32)
                self.built.value = cudnn_conv.compiled_graph_for("conv_scale_bias_relu", self.x.shape, self.w.shape,
                                                                 a.stride, a.padding, a.dilation, self.x.device.id,
                                                                 dtype=self.x.dtype, tf32=self.tf32)
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
                    f"{self.x.shape} * {self.w.shape} -> {self.out.shape} {self.out.dtype} (if cuDNN rejects it: "
                    f"conv + epilogue kernel); {math_note(self.x.dtype, self.tf32)}")
        return (f"CBR inference on cuda: cuDNN rejected the single graph ({reason}); conv + fused epilogue kernel:\n"
                + "\n".join("    " + s.describe(source) for s in self.fallback))


# kind -> (what explain calls it, the cuDNN graph kind, the CPU function)
_KINDS = {
    "dgrad": ("dgrad: dx = conv2d_backward_data(dy, w)", "conv_dgrad", conv2d_backward_data_nhwc),
    "wgrad": ("wgrad: dw = conv2d_backward_filter(x, dy)", "conv_wgrad", conv2d_backward_filter_nhwc),
}


# kind -> how the CPU computes it (cbr/conv_cpu.py)
_CPU_HOW = {"dgrad": "one BLAS matmul per window tap",
            "wgrad": "im2col + one BLAS matmul per block of images"}


class ConvBackwardStep(Step):
    """dgrad (a = dy, b = w, out = dx) or wgrad (a = x, b = dy, out = dw): a cuDNN graph on CUDA,
    BLAS on the CPU or on the host (dgrad per window tap, wgrad over im2col columns).
    `x_shape`/`w_shape` are the forward conv's."""
    __slots__ = ("backend", "kind", "a", "b", "x_shape", "w_shape", "attrs", "out", "path", "note", "built", "tf32")
    # (kind, x shape, w shape, dtype, tf32, attrs) -> why cuDNN rejected the graph: with
    # lt.config.allow_host run on the host, else UnsupportedOnDevice
    rejected: dict = {}

    def __init__(self, backend, kind, a, b, x_shape, w_shape, attrs, out, path, note=""):
        self.backend, self.kind, self.a, self.b, self.attrs, self.out = backend, kind, a, b, attrs, out
        self.x_shape, self.w_shape, self.path, self.note = x_shape, w_shape, path, note
        self.built = Learned()    # the cuDNN graph the first run built
        self.tf32 = conv_tf32(a.dtype)

    def _key(self):
        return (self.kind, self.x_shape, self.w_shape, self.a.dtype.name, self.tf32, self.attrs)

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
            with single_threaded_blas():
                cpu_function(*self._args(self.a, self.b), out=self.out)
            return
        if self.path == "cudnn":
            why = self.rejected.get(self._key())
            if why is None:
                from lazytensor.cbr import cudnn_conv_backward
                from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
                run = cudnn_conv_backward.conv2d_dgrad if self.kind == "dgrad" else cudnn_conv_backward.conv2d_wgrad
                try:
                    run(*self._args(self.a, self.b), out=self.out, tf32=self.tf32)
                    self.built.value = self._compiled()
                    return
                except CudnnGraphRejected as e:
                    why = self.rejected[self._key()] = e.reason
            host_fallback(f"the {self.kind} of the conv of x {self.x_shape} by w {self.w_shape} ({self.a.dtype})",
                          f"cuDNN rejected the {graph_kind} graph ({why})")
        import cupy         # on the host (lt.config.allow_host): cuDNN cannot take this call
        result = cpu_function(*self._args(cupy.asnumpy(self.a), cupy.asnumpy(self.b)))
        self.out.set(result)

    def _compiled(self):
        from lazytensor.cbr.cudnn_conv_backward import compiled_backward_graph_for
        at = self.attrs
        return compiled_backward_graph_for(_KINDS[self.kind][1], self.x_shape, self.w_shape, at.stride, at.padding,
                                           at.dilation, self.a.device.id, dtype=self.a.dtype, tf32=self.tf32)

    def _on_host(self) -> bool:
        return self.path == "host" or (self.path == "cudnn" and self._key() in self.rejected)

    def capture_refusal(self):
        if self.path == "cpu":
            return "the backward conv runs on the CPU"
        return f"the {self.kind} runs on the host" if self._on_host() else None

    def describe(self, source: bool = True) -> str:
        what, graph_kind, _ = _KINDS[self.kind]
        cpu_how = _CPU_HOW[self.kind]
        if self.path == "cpu":
            how = f"{cpu_how} (NumPy)"
        elif self._on_host():
            why = self.rejected.get(self._key())
            how = f"on the host (lt.config.allow_host): {cpu_how}, copied back to the device"
            if why is not None:
                how += f" (cuDNN rejected the {graph_kind} graph: {why})"
        else:
            how = f"cuDNN {graph_kind} graph; {math_note(self.a.dtype, self.tf32)}"
        text = (f"ConvBackward on {self.backend.name}, {what}: {self.a.shape}, {self.b.shape} -> {self.out.shape} "
                f"{self.out.dtype}, stride {self.attrs.stride}, padding {self.attrs.padding}, dilation "
                f"{self.attrs.dilation}: {how}")
        if self.path == "cudnn" and not self._on_host() and source:
            try:
                compiled = self._compiled()
            except Exception:   # explain must not fail over a graph that was never built
                compiled = None
            if compiled is not None:
                text += "\n  plan: " + compiled.describe()
        if self.note:
            text += f"\n  note: {self.note}"
        return text


class ChannelPadded(Step):
    """`inner` (a conv step over padded buffers) between the copies in and the copy out.
    `pads`: [(source, padded buffer, the buffer's view of the source's shape)]; `result`: the view
    of the inner step's output that `out` receives (None: the inner step writes `out` itself)."""
    __slots__ = ("inner", "pads", "result", "out", "what", "note")
    writes = ("result", "out")
    path = "cudnn-padded"       # what the batch_norm planner reads of a conv step (it times stage 1 for "cudnn")

    def __init__(self, inner, pads, result, out, what, note=""):
        self.inner, self.pads, self.result, self.out, self.what = inner, pads, result, out, what
        self.note = note            # why the conv as it is does not go to cuDNN; planners may add to it

    def run(self):
        for source, buffer, view in self.pads:
            buffer.fill(0)
            view[...] = source
        self.inner.run()
        if self.result is not None:
            self.out[...] = self.result

    def capture_refusal(self):
        return self.inner.capture_refusal()

    def describe(self, source: bool = True) -> str:
        text = (f"ChannelPadded: {self.what}; the operands' padding zeroed and the operands copied in, the result "
                f"copied out (one copy kernel each), around:\n"
                + "\n".join("    " + line for line in self.inner.describe(source).splitlines()))
        if self.note:
            text += f"\n  note: {self.note}"
        return text
