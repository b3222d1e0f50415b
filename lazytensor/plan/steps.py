"""The steps a plan is made of. Each runs one kernel (or library call) and describes itself for
lt.explain; the planner (lazytensor.plan.planner) decides which steps an expression needs."""
from __future__ import annotations

import contextlib
import signal
import threading

from lazytensor.core.memory import owner
from lazytensor.kernels.cuda.device_memory import as_out_of_memory, is_out_of_memory
from lazytensor.kernels.program import describe

# A hook for tests, None in use: called as before_step(index, step) before each step of a plan runs
# (raising there stands for an interrupt or a failure between two steps).
before_step = None


def run_steps(steps, out=None) -> None:
    """Run a plan's steps in order: the one loop every plan goes through. Running out of GPU memory
    in a step raises DeviceOutOfMemory saying which step, and whether anything the caller holds was
    written before it (`out`, the plan's destination or a list of them; running statistics are
    written by the last step only, lazytensor.plan.conv.steps.CommitStep)."""
    step = None
    try:
        if before_step is None:
            for step in steps:
                step.run()
        else:
            for i, step in enumerate(steps):
                before_step(i, step)
                step.run()
    except Exception as e:
        if not is_out_of_memory(e):
            raise
        i = next(k for k, s in enumerate(steps) if s is step)
        error = as_out_of_memory(e, "the step's own use")
        error.context.append(f"in step {i + 1} of {len(steps)} of the plan ({type(step).__name__})")
        outs = {id(owner(o)) for o in (out if isinstance(out, (list, tuple)) else (out,)) if o is not None}
        error.untouched = not any(_writes_callers_memory(s, outs) for s in steps[:i])
        if error is e:
            raise
        raise error from e


_held = None        # the interrupts an active interrupts_deferred() block holds back, or None


@contextlib.contextmanager
def interrupts_deferred():
    """Ctrl-C (SIGINT) held back until the block ends, then delivered: the writes inside all happen,
    so an interrupt never leaves state half updated (an optimizer step's parameters and moments).
    In the main thread only, where Python delivers signals; nested blocks defer to the outermost."""
    global _held
    previous = signal.getsignal(signal.SIGINT)
    if _held is not None or previous is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    held = _held = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _held = None
        if held:
            if callable(previous):
                previous(signal.SIGINT, held[0])
            elif previous == signal.SIG_DFL:
                raise KeyboardInterrupt


def _writes_callers_memory(step, outs) -> bool:
    if hasattr(step, "running"):                # commits running statistics
        return True
    targets = getattr(step, "out", None)
    targets = targets if isinstance(targets, (list, tuple)) else (targets,)
    return any(t is not None and hasattr(t, "shape") and id(owner(t)) in outs for t in targets)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


class Step:
    """What every step of a plan is; plan recipes (lazytensor.reuse.recipes) rely on it:
    - its state is its `__slots__`: a recipe rebuilds a step with cls.__new__ and sets every slot,
      each array replaced by the new call's, each other value shared among the copies (a Learned);
    - `per_arrays` names the slots built from its arrays, which a rebuilt step starts without (None);
    - run() runs it, describe(source) is its text in lt.explain, capture_refusal() says why it
      cannot be captured into a CUDA graph (lazytensor.reuse.replay), or None;
    - `writes` names the slots holding the arrays it writes: a recorded step's order
      (lazytensor.step.step_order) moves a step only past steps that neither write what it reads
      nor read what it writes, and a step may write memory another step allocated (a part of a
      concatenation, an all-reduce in place)."""
    __slots__ = ()
    per_arrays = ()
    writes = ("out", "outs")

    def run(self) -> None:
        raise NotImplementedError

    def describe(self, source: bool = True) -> str:
        raise NotImplementedError

    def capture_refusal(self) -> str | None:
        """A step of kernel launches on the backend's stream: captured where the backend has graphs."""
        return None if self.backend.graphs else f"the {self.backend.name} backend has no graphs"


def capture_refusal(step) -> str | None:
    """Why `step` cannot be captured into a CUDA graph, or None when it can."""
    refusal = getattr(step, "capture_refusal", None)
    if refusal is None:
        return f"{type(step).__name__} steps cannot be captured"
    return refusal()


def first_refusal(steps) -> str | None:
    """The first reason one of `steps` cannot be captured, or None when all can."""
    return next(filter(None, (capture_refusal(s) for s in steps)), None)


class Learned:
    """What a step learns on its first run that depends on its plan's signature alone: the cuDNN
    graph it built and checked, a kernel's launch plan. A plan recipe shares every value of a step
    that is not an array among the copies it makes (lazytensor.reuse.recipes), so one run learns for all."""
    __slots__ = ("value",)

    def __init__(self):
        self.value = None


class FusedElementwise(Step):
    """One generated kernel: reads `inputs` (broadcast and strides in the indexing), writes `out`
    (and, for programs with a ReLU mask, the packed mask bits into `mask`)."""
    __slots__ = ("backend", "program", "out", "inputs", "scalars", "note", "mask", "bound", "memo")
    per_arrays = ("bound",)     # built from this step's arrays: a step rebound to others starts without it

    def __init__(self, backend, program, out, inputs, scalars, note="", mask=None):
        self.backend = backend
        self.program = program
        self.out = out
        self.inputs = inputs
        self.scalars = scalars
        self.note = note
        self.mask = mask
        self.bound = None     # a backend's launch with its arguments, where it can bind one
        self.memo = Learned()   # the backend's launch plan, found on the first binding

    def run(self):
        # A step's arrays and scalars never change, so a backend that can bind them (CUDA) builds
        # the kernel arguments on the first run and a re-run of the plan is the launch alone.
        if self.bound is not None:
            self.bound()
            return
        bind = self.backend.bind_elementwise
        if bind is not None:
            self.bound = bind(self.program, self.out, self.inputs, self.scalars, self.mask, self.memo)
            self.bound()
        elif self.mask is None:
            self.backend.run_elementwise(self.program, self.out, self.inputs, self.scalars)
        else:
            self.backend.run_elementwise(self.program, self.out, self.inputs, self.scalars, mask=self.mask)

    def describe(self, source: bool = True) -> str:
        head = (f"FusedElementwise on {self.backend.name}: {len(self.program.instrs)} values, "
                f"{self.program.n_inputs} array inputs, {len(self.scalars)} scalar arguments, "
                f"{self.out.size} elements of {self.program.out_dtype.name} {self.out.shape}")
        if self.mask is not None:
            head += f", and the ReLU mask packed 1 bit per element ({self.mask.size} bytes)"
        if self.note:
            head += f"\n  note: {self.note}"
        text = head + "\n" + _indent(describe(self.program))
        if source:
            text += "\n" + _indent(self.backend.explain_elementwise(self.program, self.out, self.inputs))
        return text


class FusedReduction(Step):
    """One generated kernel: evaluates the elementwise program over the reduction's input shape and
    reduces it (sum, max, var, ...) into `out`, without materializing the input."""
    __slots__ = ("backend", "program", "spec", "out", "inputs", "scalars", "note", "scratch")
    writes = ("out", "scratch")

    def __init__(self, backend, program, spec, out, inputs, scalars, note=""):
        self.backend = backend
        self.program = program
        self.spec = spec
        self.out = out
        self.inputs = inputs
        self.scalars = scalars
        self.note = note
        # Memory for partial results, where the backend splits the reduction: taken with the plan,
        # so that a rebound plan has its own and a captured graph (lazytensor.reuse.replay) owns none.
        scratch = backend.reduction_scratch
        self.scratch = None if scratch is None else scratch(program, spec, out, inputs)

    def run(self):
        if self.scratch is None:
            self.backend.run_reduction(self.program, self.spec, self.out, self.inputs, self.scalars)
        else:
            self.backend.run_reduction(self.program, self.spec, self.out, self.inputs, self.scalars, self.scratch)

    def capture_refusal(self):
        if not self.backend.graphs:
            return f"the {self.backend.name} backend has no graphs"
        if not self.out.flags.c_contiguous:
            return "the reduction writes a strided result through a temporary it takes on every call"
        return None

    def describe(self, source: bool = True) -> str:
        s = self.spec
        head = (f"FusedReduction on {self.backend.name}: {s.kind}{' (sqrt: std)' if s.root else ''} over axes "
                f"{s.axes} of {s.in_shape}, accumulating in {s.acc_dtype.name}, -> {s.out_dtype.name} "
                f"{s.out_shape}; {self.program.n_inputs} array inputs")
        if self.note:
            head += f"\n  note: {self.note}"
        text = head + "\n" + _indent(describe(self.program))
        if source:
            text += "\n" + _indent(self.backend.explain_reduction(self.program, self.spec, self.out, self.inputs))
        return text
