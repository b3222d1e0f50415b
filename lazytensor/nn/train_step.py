"""lt.train_step(model, loss_fn, optimizer): one training step, planned once.

Design: docs/design/training-step.md, section "lazytensor/nn/train_step.py".
"""
from __future__ import annotations

import numpy as np

from lazytensor.autodiff.reverse import grad
from lazytensor.core.operand import Operand
from lazytensor.core.tensor import empty
from lazytensor.nn.amp import LossScaler
from lazytensor.nn import data_parallel
from lazytensor.ops.collectives import all_reduced
from lazytensor.nn.optim import Optimizer
from lazytensor.nn.step_memory import memory_lines
from lazytensor.nn.utils import clip_grad_norm
from lazytensor.reuse.bounded import make_room
from lazytensor.assign.evaluate import evaluate
from lazytensor.step.recorded import RecordedAssignment
from lazytensor.plan.steps import interrupts_deferred
from lazytensor.kernels.config import config
from lazytensor.plan.step_summary import counted, step_lines, summarized
from lazytensor.core.dtypes import BFLOAT16, is_float

_MAX_PLANS = 4          # input shapes kept (a last, smaller batch is a second plan)


class PlannedStep:
    """The recorded step for one input signature: the static input buffers, the loss's
    destination and the recorded plan that writes it and every parameter and state."""
    __slots__ = ("x", "labels", "loss", "plan", "results", "calls", "backward", "buckets")

    def __init__(self, x, labels, loss, plan, results, backward=(), buckets=()):
        self.x, self.labels, self.loss, self.plan, self.results = x, labels, loss, plan, results
        self.buckets = list(buckets)        # distributed: the gradient buckets, (indices, bytes)
        self.backward = tuple(backward)     # what lt.grad decided per Conv-BN block (Gradients.paths), as text
        self.calls = 1


class TrainStep:
    """One training step of `model` under `optimizer`: see lt.train_step."""

    def __init__(self, model, loss_fn, optimizer, *, amp=False, distributed=False, max_grad_norm=None,
                 grad_norm_type=2.0):
        if not callable(model) or not hasattr(model, "parameters"):
            raise TypeError(f"lt.train_step: model must be an lt.nn.Module (callable, with parameters()); "
                            f"got {type(model).__name__}")
        if not callable(loss_fn):
            raise TypeError(f"lt.train_step: loss_fn must be callable as loss_fn(logits, labels) -> a scalar "
                            f"expression, e.g. lt.cross_entropy; got {type(loss_fn).__name__}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"lt.train_step: optimizer must be an lt.optim optimizer (SGD, AdamW, LARS, LAMB); "
                            f"got {type(optimizer).__name__}")
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.device = optimizer.params[0].device
        self.scaler = None
        self.amp_dtype = _amp_dtype(amp)
        if self.amp_dtype is not None:
            name = self.amp_dtype.name
            spelled = "np.float16" if name == "float16" else "lt.bfloat16"
            if not any(p.dtype == self.amp_dtype for p in optimizer.params):
                raise ValueError(f"lt.train_step(amp={amp!r}) computes in {name}: build the model with "
                                 f"dtype={spelled} (e.g. lt.nn.vgg16_bn(10, 32, dtype={spelled})); its optimizer "
                                 f"keeps float32 master weights and BatchNorm stays float32")
            if self.amp_dtype == np.float16:      # bfloat16 has float32's range: no loss scaling
                self.scaler = (amp if isinstance(amp, LossScaler) else LossScaler()).on(self.device)
        self.amp = self.amp_dtype is not None
        self.max_grad_norm = None if max_grad_norm is None else float(max_grad_norm)
        self.grad_norm_type = float(grad_norm_type)
        if self.max_grad_norm is not None and not (self.grad_norm_type > 0):
            raise ValueError(f"lt.train_step: grad_norm_type must be positive or inf; got {grad_norm_type}")
        self.grad_norm = None       # with max_grad_norm: the latest step's total gradient norm (a 0-d Tensor)
        self.distributed = bool(distributed)
        if self.distributed:
            data_parallel.broadcast_parameters(model, optimizer)
        self._plans: dict = {}
        self.last = None            # the PlannedStep of the latest call

    def __call__(self, x, labels):
        key = (_signature(x, "x"), _signature(labels, "labels"), self.optimizer.hyperparameters(),
               self.scaler.hyperparameters() if self.scaler is not None else None, config.state(),
               (self.max_grad_norm, self.grad_norm_type))
        planned = self._plans.get(key)
        # Ctrl-C during the step arrives after it: parameters and state are never half updated.
        with interrupts_deferred():
            if planned is None:
                planned = self._record(x, labels)
                make_room(self._plans, _MAX_PLANS, lambda old: old.plan.release())
                self._plans[key] = planned
            else:
                planned.x[...] = x
                planned.labels[...] = labels
                planned.plan.run()
                planned.calls += 1
            self.optimizer.steps += 1
        self.last = planned
        return evaluate(planned.loss)

    def _record(self, x, labels) -> PlannedStep:
        dtype = _dtype(x)
        if self.amp and is_float(dtype):
            dtype = self.amp_dtype              # activations in float16 or bfloat16
        xs = empty(tuple(x.shape), dtype, self.device)
        xs[...] = x
        ys = empty(tuple(labels.shape), _dtype(labels), self.device)
        ys[...] = labels
        self.model.train()
        logits = self.model(xs)
        if self.amp:
            logits = logits.astype(np.float32)  # the loss in float32, as PyTorch's autocast computes it
        loss = self.loss_fn(logits, ys)
        del logits
        if not isinstance(loss, Operand) or loss.size != 1 or not is_float(loss.dtype):
            raise ValueError(f"lt.train_step: loss_fn must return a scalar float expression (such as "
                             f"lt.cross_entropy(logits, labels)); got {loss!r:.100}")
        loss_out = empty(tuple(loss.shape), loss.dtype, self.device)
        groups = ()
        opt = self.optimizer
        if self.scaler is not None:
            scaler = self.scaler
            grads = grad(scaler.scaled(loss), opt.params)
            backward = [what for _, what in grads.paths]
            if self.distributed:    # every rank skips the step where any rank overflowed
                grads, found = scaler.unscaled(grads)
                grads, groups = data_parallel.averaged(grads)
                found = all_reduced(found, "max", "AMP found_inf")
                targets = opt.targets(grads)
                grads = [t.grad for t in targets]
            else:                   # found_inf over each region's gradients as written: one reduction each
                targets = opt.targets(grads)
                found = scaler.found([t.grad for t in targets])
                grads = scaler.unscale([t.grad for t in targets])
            grads, norm = self._clipped(grads)
            updates = scaler.guarded(opt.target_updates(targets, grads), found) + scaler.updates(found) + norm
            del found
        else:
            grads = grad(loss, opt.params)
            backward = [what for _, what in grads.paths]
            if self.distributed:
                grads, groups = data_parallel.averaged(list(grads))
            targets = opt.targets(grads)
            grads, norm = self._clipped([t.grad for t in targets])
            updates = opt.target_updates(targets, grads) + norm
        del grads, targets
        updates += _state_updates(self.model)
        if self.distributed:        # the loss reported is the global batch's
            loss = all_reduced(loss, "mean", "the loss")
        pairs = [(loss_out, loss)] + updates
        del updates
        plan = RecordedAssignment(pairs, "train_step")
        return PlannedStep(xs, ys, loss_out, plan, len(pairs), backward, groups)

    def _clipped(self, grads) -> tuple:
        """(the gradients of each unit, scaled as torch.nn.utils.clip_grad_norm_ scales them where
        max_grad_norm is set; the write of the total norm into self.grad_norm, as pairs)."""
        if self.max_grad_norm is None:
            return grads, []
        grads, total = clip_grad_norm(grads, self.max_grad_norm, self.grad_norm_type)
        if self.grad_norm is None or self.grad_norm.dtype != total.dtype:
            self.grad_norm = empty((), total.dtype, self.device)
        return grads, [(self.grad_norm, total)]

    # -- lt.explain(step) ----------------------------------------------------------------------
    def explanation(self, source: bool = True, detail=None):
        """(text, steps, notes) for lt.explain: the recorded plan of the latest call. The text's first
        two lines are `key: value` (a notebook shows them as a table), the notes follow the steps,
        which a plan of more than 20 steps lists by kind unless detail=True."""
        amp = (f"on, float16 activations and weights, float32 master weights and BatchNorm, dynamic loss "
               f"scaling decided on the device ({self.scaler!r}: found_inf is a reduction over every gradient, each "
               f"write is where(found_inf, old, new))" if self.scaler is not None else
               "on, bfloat16 activations and weights, float32 master weights and BatchNorm, no loss scaling "
               "(bfloat16 has float32's range)" if self.amp else "off")
        head = [f"train_step: {type(self.model).__name__}, loss {getattr(self.loss_fn, '__name__', self.loss_fn)!s}, "
                f"optimizer {type(self.optimizer).__name__}({_hyper(self.optimizer)}), on {self.device}",
                f"amp: {amp}"]
        planned = self.last
        if planned is None:
            note = "not planned yet: the first call step(x, labels) builds, plans and runs the step"
            return "\n".join(head + [note]), [], [note]
        rec = planned.plan
        steps = rec.steps
        before = [f"inputs: x {planned.x.dtype.name} {planned.x.shape} and labels {planned.labels.dtype.name} "
                  f"{planned.labels.shape}, copied into static buffers on each call (one copy kernel each, before the "
                  f"steps; the loss is copied out after them into the 0-d Tensor the call returns)",
                  f"planned on the first call: {len(steps)} steps writing {planned.results} results (the loss, "
                  f"every parameter and optimizer state) as one simultaneous assignment; batch_norm's running "
                  f"statistics by its commit steps; {planned.calls} calls of this plan, "
                  f"{planned.calls - 1} of them re-running the recorded steps (no expression built, nothing planned)"]
        fused = sum(what.startswith("fused CBR backward") for what in planned.backward)
        if planned.backward:
            before.append(f"backward: {fused} of {len(planned.backward)} Conv-BN blocks take the fused CBR backward "
                          f"(the forward's saved results are values of this plan, written by its forward steps)")
            if summarized(steps, detail):    # the blocks that decided alike on one line
                before += [f"  {n} block{'s' if n != 1 else ''}: {what}" for what, n in counted(planned.backward)]
            else:
                before += [f"  block {k}: {what}" for k, what in enumerate(planned.backward, 1)]
        if self.distributed:
            before += data_parallel.bucket_lines(planned.buckets)
        after = memory_lines(planned, self.optimizer) + [
            rec.describe_graph(),
            "streams: the steps run in order on the current stream (a step that forks to a second stream says so above)"]
        lines = head + before + step_lines(steps, source, detail) + after
        return "\n".join(lines), steps, before + after


def train_step(model, loss_fn, optimizer, *, amp=False, distributed=False, max_grad_norm=None,
               grad_norm_type=2.0) -> TrainStep:
    """One training step, planned once: `step = lt.train_step(model, loss_fn, optimizer)`, then
    `loss = step(x, labels)` runs forward (train mode), lt.grad and the optimizer's update and
    returns the loss as a 0-d Tensor. amp: False; True, "float16" or a LossScaler (float16 with
    dynamic loss scaling); "bfloat16" (no loss scaling). distributed=True: data parallel over the
    ranks of lazytensor.distributed (each rank passes its shard; gradients averaged in buckets,
    parameters broadcast from rank 0 now). max_grad_norm: the gradients clipped by their total norm
    (grad_norm_type 2, inf or another positive p) as torch.nn.utils.clip_grad_norm_ clips them, after
    unscaling (AMP) and averaging (distributed), in the same plan; `step.grad_norm` holds the latest
    total norm. See lazytensor.nn.train_step."""
    return TrainStep(model, loss_fn, optimizer, amp=amp, distributed=distributed, max_grad_norm=max_grad_norm,
                     grad_norm_type=grad_norm_type)


def _state_updates(model) -> list:
    """The (tensor, new value) pairs modules ask the step to write besides the parameters
    (SyncBatchNorm's running statistics), from the forward just built."""
    pairs = []
    for _, module in model.named_modules():
        pairs += getattr(module, "state_updates", None) or []
        if hasattr(module, "state_updates"):
            module.state_updates = []
    return pairs


def _amp_dtype(amp):
    """The compute dtype amp= names, or None for amp=False."""
    if amp is False or amp is None:
        return None
    if amp is True or isinstance(amp, LossScaler) or amp == "float16" or amp is np.float16:
        return np.dtype(np.float16)
    if amp == "bfloat16" or amp is BFLOAT16.type:
        return BFLOAT16
    raise ValueError(f"lt.train_step: amp must be False, True (float16), \"float16\", \"bfloat16\" or a LossScaler; "
                     f"got {amp!r}")


def _dtype(v) -> np.dtype:
    dtype = getattr(v, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.asarray(v).dtype


def _signature(v, name: str) -> tuple:
    if not hasattr(v, "shape"):
        raise TypeError(f"lt.train_step: {name} must be a Tensor, an expression or an array; got {type(v).__name__}")
    return (tuple(v.shape), _dtype(v))


def _hyper(optimizer) -> str:
    return ", ".join(f"{k}={v}" for k, v in optimizer.hyperparameters())
