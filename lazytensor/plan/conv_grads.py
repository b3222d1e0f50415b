"""Stages 2 and 3 of the CBR backward as one plan: wgrad dW = conv2d_backward_filter(x, d_conv) and
dgrad dX = conv2d_backward_data(d_conv, w), with dX optionally written into X's own memory.

The write hazard (the seed's COMP_2 / COMP_3): X is dead after the backward, so dX may take its
memory (one activation per layer less), but wgrad reads X, so dgrad must not start before wgrad
has read it. WgradThenDgrad makes that order explicit:
  - on the CPU the steps run one after the other, wgrad first;
  - on CUDA, on one stream, stream order is the order; on two streams (wgrad on a side stream
    forked from the current one by an event, dgrad on the current stream, joined back by a second
    event: never a host sync, so a CUDA graph capture takes the fork and join like any launch),
    dgrad waits on wgrad's event when it overwrites X, and runs alongside wgrad otherwise.
Two streams are used where that measured faster for the shape (timed once, kept in memory and in
the disk cache like the forward's stage-1 choice; LAZYTENSOR_CBR_TUNE=0 keeps one stream), never
when dX takes X's memory (dgrad would wait for wgrad anyway).
"""
from __future__ import annotations

import functools

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import Expr
from lazytensor.plan.measured_choice import MeasuredChoices
from lazytensor.plan.cbr_plan import _contiguous
from lazytensor.plan.conv_backward_plan import backward_path, backward_step
from lazytensor.plan.planner import cutter
from lazytensor.plan.replay import first_refusal
from lazytensor.plan.steps import run_steps



class WgradThenDgrad:
    """wgrad, then dgrad (which may overwrite wgrad's X): see the module doc."""
    __slots__ = ("backend", "wgrad", "dgrad", "dx_in_x", "side", "events", "note")
    order = ("wgrad", "dgrad")      # the hazard's order; tests run a stand-in with it reversed

    def __init__(self, backend, wgrad, dgrad, dx_in_x, side=None, note=""):
        self.backend, self.wgrad, self.dgrad, self.dx_in_x = backend, wgrad, dgrad, dx_in_x
        self.side = side            # a cupy Stream for wgrad, or None: everything on the current stream
        self.events = None
        if side is not None:
            import cupy
            self.events = (cupy.cuda.Event(disable_timing=True), cupy.cuda.Event(disable_timing=True))
        self.note = note

    def run(self):
        if self.side is None:
            for kind in self.order:
                getattr(self, kind).run()
            return
        import cupy
        main = cupy.cuda.get_current_stream()
        forked, wgrad_done = self.events
        forked.record(main)                 # the side stream starts after what d_conv depends on
        self.side.wait_event(forked)
        with self.side:
            self.wgrad.run()
        wgrad_done.record(self.side)
        if self.dx_in_x:
            main.wait_event(wgrad_done)     # dgrad overwrites X, which wgrad reads
        self.dgrad.run()
        main.wait_event(wgrad_done)         # join: whatever follows sees dW

    def capture_refusal(self):
        return first_refusal([self.wgrad, self.dgrad])

    def describe(self, source: bool = True) -> str:
        if self.side is None:
            how = "one after the other" + (" on the current stream" if self.backend.name == "cuda" else "")
        else:
            how = ("wgrad on a side stream forked by an event, dgrad on the current stream "
                   + ("after wgrad's event (dX overwrites X, which wgrad reads)" if self.dx_in_x else "alongside it")
                   + ", joined by an event")
        head = (f"WgradThenDgrad on {self.backend.name}: {how}"
                + ("; dX is written into X's memory, so dgrad runs only after wgrad has read X" if self.dx_in_x else ""))
        if self.note:
            head += f"\n  note: {self.note}"
        return head + "\n" + "\n".join("    " + line for s in (self.wgrad, self.dgrad)
                                       for line in s.describe(source).splitlines())


def _key(x, w, attrs) -> str:
    from lazytensor.plan.cbr_stage1 import _device_name
    return f"{_device_name(x.data.device.id)}|{x.shape}|{w.shape}|{attrs.stride}|{attrs.padding}|{attrs.dilation}"


def _valid(value) -> bool:
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], bool) and isinstance(value[1], str)


_CHOICES = MeasuredChoices("cbr_conv_grads.json", _valid, (False, "LAZYTENSOR_CBR_TUNE=0: one stream, not timed"))
_DISK = _CHOICES.disk


def _choose_streams(step, x, w, attrs):
    """(use two streams, a note with the times): measured once per shape on CUDA."""
    return _CHOICES.choose(_key(x, w, attrs), lambda: _measure_streams(step))


def _measure_streams(step):
    import cupy
    from lazytensor.kernels.cuda_timing import burst_ms
    step.wgrad.run()                                  # builds the graphs before anything is timed
    step.dgrad.run()
    one = burst_ms(functools.partial(WgradThenDgrad.run, step), bursts=3, burst=5, warmup=1)
    step.side = cupy.cuda.Stream(non_blocking=True)
    step.events = (cupy.cuda.Event(disable_timing=True), cupy.cuda.Event(disable_timing=True))
    two = burst_ms(functools.partial(WgradThenDgrad.run, step), bursts=3, burst=5, warmup=1)
    step.side = step.events = None
    return two < one, f"measured: one stream {one:.3f} ms, two streams {two:.3f} ms", True


def plan_conv_grads(d_conv, x, w, attrs, dx_in_x: bool = False):
    """-> (steps, dx array, dw array) for the two backward convolutions of d_conv (an expression or
    Tensor of the conv's output shape). dx_in_x: dX takes x's memory (x must be a dense Tensor)."""
    if not isinstance(x, _tensor.Tensor) and dx_in_x:
        raise TypeError(f"dx_in_x=True writes dX into x's memory: x must be a Tensor, got {type(x).__name__}")
    from lazytensor.kernels.backend import backend_for
    backend = backend_for(x.device)
    steps: list = []
    cut = cutter(steps, backend)
    xs, ws, dy = (_contiguous(cut(v), backend, steps, cut) for v in (x, w, d_conv))
    if dx_in_x and xs.data is not x.data:
        raise ValueError("dx_in_x=True needs x to be a C-contiguous tensor (dX is written into its memory as NHWC); "
                         "pass dx_in_x=False, or make x contiguous first")
    if dx_in_x and dy.dtype != xs.dtype:
        raise ValueError(f"dx_in_x=True: dX has d_conv's dtype {dy.dtype.name}, which x's memory ({xs.dtype.name}) "
                         "cannot hold; pass d_conv in x's dtype")
    x_shape, w_shape = tuple(xs.shape), tuple(ws.shape)
    dx = xs.data if dx_in_x else backend.empty(x_shape, dy.dtype)
    dw = backend.empty(w_shape, xs.dtype)
    path, note = backward_path(backend, x_shape, w_shape, dy.dtype)
    wgrad = backward_step(backend, "wgrad", xs.data, dy.data, x_shape, w_shape, attrs, dw, path, note)
    dgrad = backward_step(backend, "dgrad", dy.data, ws.data, x_shape, w_shape, attrs, dx, path, note)
    pair = WgradThenDgrad(backend, wgrad, dgrad, dx_in_x)
    if backend.name == "cuda" and not dx_in_x and path == "cudnn":
        two, why = _choose_streams(pair, xs, ws, attrs)
        pair = WgradThenDgrad(backend, wgrad, dgrad, False, _side_stream(xs.data.device.id) if two else None, note=why)
    steps.append(pair)
    return steps + cut.deferred, dx, dw


@functools.lru_cache(maxsize=None)
def _side_stream(device_id: int):
    import cupy
    with cupy.cuda.Device(device_id):
        return cupy.cuda.Stream(non_blocking=True)


def conv_grads(d_conv, x, w, attrs, dx_in_x: bool = False):
    """(dX, dW) as Tensors: the backward convolutions of d_conv = the gradient of conv2d(x, w)'s output
    (attrs: that conv's ConvAttrs), wgrad before dgrad. dx_in_x=True writes dX into x's own memory,
    which then holds dX (use it when x is dead after the backward: one activation less)."""
    if isinstance(x, Expr) and dx_in_x:
        raise TypeError("dx_in_x=True writes dX into x's memory: x must be an evaluated Tensor, not an expression")
    steps, dx, dw = plan_conv_grads(d_conv, x, w, attrs, dx_in_x)
    run_steps(steps, [dx, dw])
    return _tensor.Tensor(dx, x.device), _tensor.Tensor(dw, x.device)
