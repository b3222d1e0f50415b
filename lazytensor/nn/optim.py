"""Optimizers: SGD (momentum, dampening, nesterov, weight decay) and AdamW with PyTorch's update
rules; LARS and LAMB, whose trust ratios of whole-tensor norms are reductions inside the update:
over a region, one segmented sum gives every parameter's norms in one pass (lazytensor.ops.segments),
so the update of all of a region's parameters takes the same steps whatever their shapes.

Design: docs/design/training-step.md, section "lazytensor/nn/optim.py".
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import Tensor, empty, zeros
from lazytensor.kernels.backend import backend_for
from lazytensor.ops.elementwise import sqrt, where
from lazytensor.ops.reductions import sum as _sum
from lazytensor.ops.segments import segment_broadcast, segment_sums, segments_of
from lazytensor.ops.views import ravel, reshape
from lazytensor.assign.simultaneous import assign
from lazytensor.plan.steps import interrupts_deferred
from lazytensor.core.dtypes import is_float
from lazytensor.nn.regions import regions as in_regions

_F32 = np.dtype(np.float32)


class _Unit:
    """What one kernel updates: a parameter, or a region of them (lazytensor.nn.regions) as one
    flat tensor; its master weights and state ({name: tensor}) have the same shape."""
    __slots__ = ("index", "region", "weights", "master", "state")

    def __init__(self, index, region, weights):
        self.index, self.region, self.weights, self.master, self.state = index, region, weights, None, {}


class Target:
    """One update of a step: the weights it writes (a parameter, or a region's flat tensor), their
    master weights or None, the state tensors by name, the gradient, and a region's Segments (None
    for one parameter)."""
    __slots__ = ("weights", "master", "state", "grad", "segments")

    def __init__(self, weights, master, state, grad, segments=None):
        self.weights, self.master, self.state, self.grad, self.segments = weights, master, state, grad, segments


class Optimizer:
    # Rules of elementwise updates run over whole regions; a rule with per-tensor norms (LARS, LAMB)
    # does where the backend has segmented sums (the CPU's), else updates each parameter on its own.
    over_regions = True
    per_tensor_norms = False

    def __init__(self, params, lr: float, master_weights: bool = True, regions: bool | None = None):
        self.params = list(params)
        if not self.params:
            raise ValueError("the optimizer got no parameters")
        for p in self.params:
            if not isinstance(p, Tensor) or not is_float(p.dtype):
                raise TypeError(f"parameters must be floating-point Tensors; got {p!r}")
        self.lr = float(lr)
        self.steps = 0
        self.taken = zeros((), np.int64, self.params[0].device)   # steps taken, on the device
        self.master_weights = bool(master_weights)
        asked = regions is True
        if regions is None:
            # By default on the CPU only: over CUDA parameters the region updates have not yet been
            # shown to give the per-parameter step's bits (regions=True asks for them there).
            regions = all(p.device == "cpu" for p in self.params)
        # per-tensor norms as segmented sums where every parameter's backend has them
        self.segmented = all(backend_for(p.device).segmented_sums for p in self.params)
        over = self.over_regions and (self.segmented or not self.per_tensor_norms)
        if asked and not over and self.over_regions:
            raise ValueError(f"{type(self).__name__}(regions=True): its per-tensor norms over a region need "
                             f"segmented sums, which the {self.params[0].device} backend lacks; leave regions "
                             f"unset (each parameter then updates on its own)")
        packed = in_regions(self.params) if regions and over else None
        self.regions = bool(packed)
        self.units = ([_Unit(idx, region, region.flat) for idx, region in packed] if packed else
                      [_Unit([i], None, p) for i, p in enumerate(self.params)])
        for u in self.units:
            u.master = self._master_of(u) if master_weights else None
        self.master = self.per_parameter([u.master for u in self.units])
        self._param_state = [{} for _ in self.params]     # per parameter: {name: its state, a view in a region}

    def _master_of(self, u: _Unit):
        w = u.weights
        if w.dtype.itemsize >= 4:
            return None
        m = u.region.like(_F32) if u.region is not None else empty(w.shape, np.float32, w.device)
        m[...] = w.astype(np.float32)
        return m

    def _state(self, name: str) -> list:
        """State `name` of every unit: zeros in the dtype its update computes in (float32 beside master
        weights); -> that state per parameter (a region's: views of its segments)."""
        for u in self.units:
            dtype = _F32 if u.master is not None else u.weights.dtype
            u.state[name] = (u.region.like(dtype) if u.region is not None else
                             zeros(u.weights.shape, dtype, u.weights.device))
        views = self.per_parameter([u.state[name] for u in self.units])
        for state, view in zip(self._param_state, views):
            state[name] = view
        return views

    def per_parameter(self, tensors) -> list:
        """One tensor per unit -> one per parameter (a region's: the views of its segments)."""
        out = [None] * len(self.params)
        for u, t in zip(self.units, tensors):
            if t is None:
                continue
            for i, v in zip(u.index, u.region.views(t) if u.region is not None else [t]):
                out[i] = v
        return out

    def _check(self, grads) -> list:
        grads = list(grads)
        if len(grads) != len(self.params):
            raise ValueError(f"step() takes one gradient per parameter: {len(self.params)} parameters, "
                             f"{len(grads)} gradients")
        for i, (p, g) in enumerate(zip(self.params, grads)):
            if tuple(g.shape) != tuple(p.shape):
                raise ValueError(f"gradient {i} has shape {tuple(g.shape)}, its parameter {tuple(p.shape)}")
        return grads

    def targets(self, grads) -> list:
        """The step's updates as Targets: one per region, its gradients written into its flat gradient
        buffer by the steps computing them (lazytensor.nn.regions); one per parameter outside regions,
        and for a region whose gradients are all evaluated already (Tensors: copying them into the
        region would cost a kernel per shape), each parameter over its views."""
        grads = self._check(grads)
        out = []
        for u in self.units:
            if u.region is None or all(type(grads[i]) is Tensor for i in u.index):
                out += [Target(self.params[i], self.master[i], self._param_state[i], grads[i]) for i in u.index]
            else:
                out.append(Target(u.weights, u.master, u.state, u.region.gathered([grads[i] for i in u.index]),
                                  u.region.segments))
        return out

    def updates(self, grads) -> list:
        """[(tensor, its new value), ...]: one step of every parameter (and its master weight, moments
        and the step count), to be written by one simultaneous assignment."""
        return self.target_updates(self.targets(grads))

    def target_updates(self, targets, grads=None) -> list:
        """updates() of the Targets, with other gradients where given (unscaled, clipped: one per target)."""
        writes = []
        for t, g in zip(targets, grads if grads is not None else [t.grad for t in targets]):
            weights = t.weights if t.master is None else t.master
            pairs = self._update(t.state, weights, g.astype(weights.dtype) if g.dtype != weights.dtype else g, t.segments)
            if t.master is not None:
                pairs.append((t.weights, pairs[-1][1].astype(t.weights.dtype)))
            writes += pairs
        writes.append((self.taken, self.taken + 1))
        return writes

    def gradient_buffers(self) -> list:
        """The regions' flat gradient tensors made so far (persistent: written by every step)."""
        return [g for u in self.units if u.region is not None for g in u.region.gradient_buffers()]

    def hyperparameters(self) -> tuple:
        """The numbers a recorded step holds as constants: a change needs a new plan (lt.train_step)."""
        return tuple((k, v) for k, v in sorted(vars(self).items())
                     if k != "steps" and isinstance(v, (bool, int, float, tuple)))

    def step(self, grads) -> None:
        writes = self.updates(grads)
        # Ctrl-C during the step arrives after it: every parameter and moment updated, never some.
        with interrupts_deferred():
            assign(writes)
            self.steps += 1

    def _update(self, state: dict, w, g, segments=None) -> list:
        """[(tensor, its new value), ...] for weights w (a parameter, or a region of `segments`) with
        state tensors `state` ({name: tensor of w's shape}) and gradient g, the weights last."""
        raise NotImplementedError


class SGD(Optimizer):
    """PyTorch's torch.optim.SGD: g += weight_decay * w; buf = momentum * buf + (1 - dampening) * g
    (buf = g on the first step); g = g + momentum * buf if nesterov else buf; w -= lr * g."""

    def __init__(self, params, lr: float, momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False, master_weights: bool = True, regions: bool | None = None):
        super().__init__(params, lr, master_weights, regions)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("nesterov momentum needs momentum > 0 and dampening 0")
        self.momentum, self.dampening = float(momentum), float(dampening)
        self.weight_decay, self.nesterov = float(weight_decay), nesterov
        self.buffers = self._state("buf") if momentum else [None] * len(self.params)

    def _update(self, state, w, g, segments=None):
        if self.weight_decay:
            g = g + self.weight_decay * w
        writes = []
        if self.momentum:
            buf = state["buf"]
            new_buf = where(self.taken > 0, self.momentum * buf + (1.0 - self.dampening) * g, g)
            writes.append((buf, new_buf))
            g = g + self.momentum * new_buf if self.nesterov else new_buf
        writes.append((w, w - self.lr * g))
        return writes


class AdamW(Optimizer):
    """PyTorch's torch.optim.AdamW: w *= 1 - lr * weight_decay; m = b1 m + (1 - b1) g;
    v = b2 v + (1 - b2) g^2; w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
                 master_weights: bool = True, regions: bool | None = None):
        super().__init__(params, lr, master_weights, regions)
        self.b1, self.b2 = (float(b) for b in betas)
        self.eps, self.weight_decay = float(eps), float(weight_decay)
        self.m, self.v = self._state("m"), self._state("v")

    def _update(self, state, w, g, segments=None):
        t = self.taken + 1                    # this step's number, on the device (float64 below, as Python's)
        m = self.b1 * state["m"] + (1.0 - self.b1) * g
        v = self.b2 * state["v"] + (1.0 - self.b2) * (g * g)
        step_size = (self.lr / (1.0 - self.b1 ** t)).astype(w.dtype)
        denom = sqrt(v) / sqrt(1.0 - self.b2 ** t).astype(w.dtype) + self.eps
        decayed = w * (1.0 - self.lr * self.weight_decay) if self.weight_decay else w
        return [(state["m"], m), (state["v"], v), (w, decayed - step_size * (m / denom))]


def _norm(x):
    return sqrt(_sum(x * x))


def _norms(xs, segments, segmented: bool) -> list:
    """|x| of each of xs: per segment of a region's flat tensors (vectors, one value a segment), or,
    segments None, of one parameter as a vector of one value. One segmented sum computes them all in
    one pass (summing each segment as the sum of that tensor alone would); without segmented sums
    (segmented False), one reduction each."""
    if segments is None:
        if not segmented or xs[0].size == 0:
            return [reshape(_norm(x), (1,)) for x in xs]
        segments = segments_of((0,), (xs[0].size,), xs[0].size)
    sums = segment_sums([ravel(x * x) for x in xs], segments)
    return [sqrt(sums[k]) for k in range(len(xs))]


def _per_element(ratio, segments):
    """A vector of one value per segment as a factor of the weights' update: spread over a region's
    segments, or one parameter's 0-d value."""
    return reshape(ratio, ()) if segments is None else segment_broadcast(ratio, segments)


def _trust_ratio(numerator, denominator, wn, other_norm):
    """numerator / denominator where |w| and the other norm are both > 0, else 1 (the papers' guard;
    the inner where keeps a zero denominator out of the division)."""
    ok = (wn > 0) & (other_norm > 0)
    return where(ok, numerator / where(ok, denominator, 1.0), 1.0)


class LARS(Optimizer):
    """You et al. 2017 with PyTorch-style momentum: local = trust_coefficient * |w| / (|g| + wd |w|)
    (1 unless both norms are > 0); d = (g + wd w) * local; buf = d on the first step, else
    momentum * buf + d; w -= lr * buf. |.| is the L2 norm over the whole tensor, so each
    parameter's update has its own ratio: over a region, both norms of every parameter come from one
    segmented sum, then one spread of the ratios and the update's kernel (lazytensor.ops.segments)."""
    per_tensor_norms = True

    def __init__(self, params, lr: float, momentum: float = 0.9, weight_decay: float = 0.0,
                 trust_coefficient: float = 0.001, master_weights: bool = True, regions: bool | None = None):
        super().__init__(params, lr, master_weights, regions)
        self.momentum, self.weight_decay = float(momentum), float(weight_decay)
        self.trust_coefficient = float(trust_coefficient)
        self.buffers = self._state("buf") if momentum else [None] * len(self.params)

    def _update(self, state, w, g, segments=None):
        wn, gn = _norms([w, g], segments, self.segmented)
        ratio = _trust_ratio(self.trust_coefficient * wn, gn + self.weight_decay * wn, wn, gn).astype(w.dtype)
        local = _per_element(ratio, segments)
        d = (g + self.weight_decay * w) * local if self.weight_decay else g * local
        writes = []
        if self.momentum:
            buf = state["buf"]
            d = where(self.taken > 0, self.momentum * buf + d, d)
            writes.append((buf, d))
        writes.append((w, w - self.lr * d))
        return writes


class LAMB(Optimizer):
    """Per-parameter ratios, as LARS. You et al. 2019, bias-corrected as apex's FusedLAMB, no global gradient clipping:
    m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
    + wd w; ratio = |w| / |u| (1 unless both norms are > 0); w -= lr * ratio * u."""
    per_tensor_norms = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6, weight_decay: float = 0.0,
                 master_weights: bool = True, regions: bool | None = None):
        super().__init__(params, lr, master_weights, regions)
        self.b1, self.b2 = (float(b) for b in betas)
        self.eps, self.weight_decay = float(eps), float(weight_decay)
        self.m, self.v = self._state("m"), self._state("v")

    def _update(self, state, w, g, segments=None):
        t = self.taken + 1
        m = self.b1 * state["m"] + (1.0 - self.b1) * g
        v = self.b2 * state["v"] + (1.0 - self.b2) * (g * g)
        mhat = m / (1.0 - self.b1 ** t).astype(w.dtype)
        vhat = v / (1.0 - self.b2 ** t).astype(w.dtype)
        u = mhat / (sqrt(vhat) + self.eps)
        if self.weight_decay:
            u = u + self.weight_decay * w
        wn, un = _norms([w, u], segments, self.segmented)
        ratio = _per_element(_trust_ratio(wn, un, wn, un).astype(w.dtype), segments)
        return [(state["m"], m), (state["v"], v), (w, w - self.lr * ratio * u)]
