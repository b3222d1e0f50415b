"""Stages 2 and 3 of the CBR backward as one plan: wgrad dW = conv2d_backward_filter(x, d_conv) and
dgrad dX = conv2d_backward_data(d_conv, w), with dX optionally written into X's own memory.

Design: docs/design/cbr-backward.md, section "lazytensor/reuse/conv_grads.py".
"""
from __future__ import annotations

import functools

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import Expr
from lazytensor.reuse import recipes
from lazytensor.reuse import replay as graph_replay
from lazytensor.plan.measured_choice import MeasuredChoices
from lazytensor.plan.conv.operands import contiguous
from lazytensor.plan.step_summary import step_lines
from lazytensor.plan.conv.conv_backward import FIRST_LAYER_NOTE, backward_path, backward_step
from lazytensor.plan.planner import cutter
from lazytensor.reuse.several_recipes import walk
from lazytensor.plan.steps import Step, first_refusal, run_steps



class WgradThenDgrad(Step):
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
            how = "one after the other" + (" on the current stream" if self.backend.streams else "")
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
    from lazytensor.plan.conv.stage1 import _device_name
    # ("graphs": timed as captured graphs; choices timed as launches from Python are not read again)
    return f"{_device_name(x.data.device.id)}|{x.shape}|{w.shape}|{attrs.stride}|{attrs.padding}|{attrs.dilation}|graphs"


def _valid(value) -> bool:
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], bool) and isinstance(value[1], str)


_CHOICES = MeasuredChoices("cbr_conv_grads.json", _valid, (False, "LAZYTENSOR_CBR_TUNE=0: one stream, not timed"))
_DISK = _CHOICES.disk


def _backend(x):
    from lazytensor.kernels.backend import backend_for
    return backend_for(x.device)


def _choose_streams(step, x, w, attrs):
    """(use two streams, a note with the times): measured once per shape on CUDA."""
    return _CHOICES.choose(_key(x, w, attrs), lambda: _measure_streams(step))


def _measure_streams(step):
    """Each way timed as what a repeated call launches: its steps captured as one CUDA graph (the
    recipe's replay), so that the overlap shows and the host's launch cost does not (a small shape's
    launches from Python take longer than its GPU work, which would hide the difference); where
    capture fails, launched from Python."""
    import cupy
    from lazytensor.kernels.timing import burst_ms
    step.wgrad.run()                                  # builds the graphs before anything is timed or captured
    step.dgrad.run()
    how = "as captured graphs"

    def timed():
        nonlocal how
        run = functools.partial(WgradThenDgrad.run, step)
        try:
            run = step.backend.capture(run).launch
        except Exception:  # noqa: BLE001 - timed as launched from Python instead
            how = "launched from Python (capture failed)"
        return burst_ms(run, bursts=5, burst=10, warmup=2)

    one = timed()
    step.side = cupy.cuda.Stream(non_blocking=True)
    step.events = (cupy.cuda.Event(disable_timing=True), cupy.cuda.Event(disable_timing=True))
    two = timed()
    step.side = step.events = None
    return two < one, f"measured {how}: one stream {one:.3f} ms, two streams {two:.3f} ms", True


def plan_conv_grads(d_conv, x, w, attrs, dx_in_x: bool = False, first_layer: bool = False):
    """-> (steps, dx array, dw array) for the two backward convolutions of d_conv (an expression or
    Tensor of the conv's output shape). dx_in_x: dX takes x's memory (x must be a dense Tensor).
    first_layer: x is training data: wgrad alone, no dgrad planned (dx is None)."""
    if dx_in_x and first_layer:
        raise ValueError("first_layer=True plans no dgrad, so there is no dX to write into x's memory; "
                         "pass dx_in_x=False")
    if not isinstance(x, _tensor.Tensor) and dx_in_x:
        raise TypeError(f"dx_in_x=True writes dX into x's memory: x must be a Tensor, got {type(x).__name__}")
    backend = _backend(x)
    steps: list = []
    cut = cutter(steps, backend)
    xs, ws, dy = (contiguous(cut(v), backend, steps, cut) for v in (x, w, d_conv))
    if dx_in_x and xs.data is not x.data:
        raise ValueError("dx_in_x=True needs x to be a C-contiguous tensor (dX is written into its memory as NHWC); "
                         "pass dx_in_x=False, or make x contiguous first")
    if dx_in_x and dy.dtype != xs.dtype:
        raise ValueError(f"dx_in_x=True: dX has d_conv's dtype {dy.dtype.name}, which x's memory ({xs.dtype.name}) "
                         "cannot hold; pass d_conv in x's dtype")
    x_shape, w_shape = tuple(xs.shape), tuple(ws.shape)
    dw = backend.empty(w_shape, xs.dtype)
    path, note = backward_path(backend, x_shape, w_shape, dy.dtype)
    if first_layer:
        note = "; ".join(n for n in (note, FIRST_LAYER_NOTE) if n)
        steps.append(backward_step(backend, "wgrad", xs.data, dy.data, x_shape, w_shape, attrs, dw, path, note))
        return steps + cut.deferred, None, dw
    dx = xs.data if dx_in_x else backend.empty(x_shape, dy.dtype)
    wgrad = backward_step(backend, "wgrad", xs.data, dy.data, x_shape, w_shape, attrs, dw, path, note)
    dgrad = backward_step(backend, "dgrad", dy.data, ws.data, x_shape, w_shape, attrs, dx, path, note)
    pair = WgradThenDgrad(backend, wgrad, dgrad, dx_in_x)
    if backend.streams and not dx_in_x and path == "cudnn":
        two, why = _choose_streams(pair, xs, ws, attrs)
        pair = WgradThenDgrad(backend, wgrad, dgrad, False, _side_stream(xs.data.device.id) if two else None, note=why)
    steps.append(pair)
    return steps + cut.deferred, dx, dw


@functools.lru_cache(maxsize=None)
def _side_stream(device_id: int):
    import cupy
    with cupy.cuda.Device(device_id):
        return cupy.cuda.Stream(non_blocking=True)


class ConvGradsResults:
    """One conv_grads call's results, dx and dw (Tensors): the result holder its recipe fills with
    each call's arrays, and through which a CUDA graph replay hands its own out again, once the
    caller no longer holds the previous ones (lazytensor.reuse.replay)."""

    def __init__(self, dx=None, dw=None):
        self.dx, self.dw = dx, dw


plans_made = [0]    # conv_grads plans made, counted for tests (a recipe hit makes none)


def _make(args, results):
    plans_made[0] += 1
    steps, dx, dw = plan_conv_grads(*args)
    device = args[1].device
    results.dx = None if dx is None else _tensor.Tensor(dx, device)
    results.dw = _tensor.Tensor(dw, device)
    return steps


def _signature(d_conv, x, w, attrs, *flags):
    """-> (key, arrays, holders, addresses) of a conv_grads call: the structure of d_conv, x and w in
    one numbering (as several results' recipes key theirs), the conv's attributes, dx_in_x and
    first_layer."""
    parts, roots, arrays, holders, addresses = walk((d_conv, x, w), {})
    return ("conv_grads", parts, roots, attrs, *flags), arrays, holders, addresses


def planned_conv_grads(args, results) -> list:
    """The steps of conv_grads(*args), which fill `results`: planned once per structure and kept as a
    recipe (lazytensor.reuse.recipes), rebound on later calls without planning; on CUDA a call over
    the same arrays as an earlier one launches them as one captured graph (lazytensor.reuse.replay)."""
    key, arrays, holders, addresses = _signature(*args)
    holders.append(results)
    try:
        recipe = recipes.kept(key) if arrays else recipes.PLAN_EACH_TIME
    except TypeError:                   # an attribute that cannot be hashed: plan every time
        return _make(args, results)
    if recipe is not None and recipe is not recipes.PLAN_EACH_TIME:
        # (conv_grads has no destination: the Recipe's `out` is its first array, which rebinds to itself)
        return recipe.instantiate(arrays, arrays[0], holders, addresses)
    steps = _make(args, results)
    if recipe is None:
        recipes.keep(key, steps, arrays, arrays[0], holders, _backend(args[1]))
    return steps


class ConvGradsCall:
    """One lt.conv_grads call, made an object so that lt.explain can show it:
    `lt.explain(lt.ConvGradsCall(d_conv, x, w, attrs))` prints the steps a call plans (the order of
    wgrad and dgrad, one or two streams and why, each cuDNN graph's plan and where it came from: the
    experience table, timing or cuDNN's heuristic) and whether later calls rebind them or replay
    them as a CUDA graph; calling it runs lt.conv_grads."""

    def __init__(self, d_conv, x, w, attrs, dx_in_x: bool = False, first_layer: bool = False):
        self.args = (d_conv, x, w, attrs, dx_in_x, first_layer)

    def __call__(self):
        return conv_grads(*self.args)

    def explanation(self, source: bool = True, detail=None):
        """(text, steps, notes), as lt.explain shows an object that plans itself."""
        d_conv, x, w, attrs, dx_in_x, first_layer = self.args
        steps, dx, dw = plan_conv_grads(*self.args)
        what = "no dX (first layer)" if dx is None else f"dX {tuple(dx.shape)} {dx.dtype}"
        lines = [f"conv_grads: {what} and dW {tuple(dw.shape)} {dw.dtype} of conv2d(x {tuple(x.shape)}, w "
                 f"{tuple(w.shape)}), stride {attrs.stride}, padding {attrs.padding}, dilation {attrs.dilation}"
                 + ("; dX in x's memory" if dx_in_x else ""),
                 f"plan: {len(steps)} step{'s' if len(steps) != 1 else ''}"]
        lines += step_lines(steps, source, detail)
        note = _recipe_note(_signature(*self.args)[0], steps, _backend(x).graphs)
        return "\n".join(lines + [note]), steps, [note]


def _recipe_note(key, steps, graphs: bool) -> str:
    """What explain says about a conv_grads call's recipe and its CUDA graph replay."""
    try:
        recipe = recipes.kept(key)
    except TypeError:
        recipe = recipes.PLAN_EACH_TIME
    if recipe is recipes.PLAN_EACH_TIME:
        return "recipe: none; these steps are planned on every call (a step holds a view of an input)"
    text = ("recipe: kept after the first call; later calls with the same structure rebind these steps to their "
            "arrays without planning")
    replays = getattr(recipe, "replays", None)
    if not graphs:
        return text
    reason = (replays.refusal if replays is not None else None) or first_refusal(steps)
    if not graph_replay.ENABLED:
        reason = "off (LAZYTENSOR_CUDA_GRAPHS=0)"
    if reason is not None:
        return text + f"\nCUDA graph replay: not used: {reason}"
    return text + ("\nCUDA graph replay: the third call over the same tensors captures these steps (with the "
                   "streams' fork and join where there are two) into one CUDA graph, launched alone by later calls; its results are "
                   "handed out again once the caller no longer holds the previous ones"
                   + (f" ({replays.describe()})" if replays is not None else ""))


def conv_grads(d_conv, x, w, attrs, dx_in_x: bool = False, first_layer: bool = False):
    """(dX, dW) as Tensors: the backward convolutions of d_conv = the gradient of conv2d(x, w)'s output
    (attrs: that conv's ConvAttrs), wgrad before dgrad. dx_in_x=True writes dX into x's own memory,
    which then holds dX (use it when x is dead after the backward: one activation less).
    first_layer=True: x is training data, so no dgrad is planned: (None, dW).
    d_conv may be an expression (the CBR backward's stage 1): it is planned with the convolutions.
    Planned once per structure, then rebound (and on CUDA replayed as one graph): see planned_conv_grads."""
    if isinstance(x, Expr) and dx_in_x:
        raise TypeError("dx_in_x=True writes dX into x's memory: x must be an evaluated Tensor, not an expression")
    results = ConvGradsResults()
    steps = planned_conv_grads((d_conv, x, w, attrs, bool(dx_in_x), bool(first_layer)), results)
    run_steps(steps, [x.data] if dx_in_x else None)
    return results.dx, results.dw
