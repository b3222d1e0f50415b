"""Dynamic loss scaling for mixed precision (lt.train_step(..., amp=True)), decided on the device.

float16 gradients underflow where float32 ones do not, so the loss is multiplied by a scale before
lt.grad and the gradients divided by it before the update (PyTorch's GradScaler, with its defaults:
scale 2**16, halved on overflow, doubled after 2000 steps without one). Whether a step overflowed is
`found_inf`, a reduction over every gradient (any element not finite); the step's writes become
`where(found_inf, old, new)` and the scale and the count of good steps are expressions of found_inf,
all in the step's one simultaneous assignment: nothing is read back to the host, so a step can be
captured in a CUDA graph and a skipped step costs no synchronization.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import full, zeros
from lazytensor.ops.elementwise import isfinite, where
from lazytensor.ops.reductions import any as any_

_F32 = np.dtype(np.float32)


class LossScaler:
    """The device state of dynamic loss scaling: `scale` (float32), `good_steps` (int64, steps since
    the last overflow or growth) and `found_inf` (bool: whether the latest step was skipped)."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000):
        if not (init_scale > 0 and growth_factor > 1 and 0 < backoff_factor < 1 and growth_interval >= 1):
            raise ValueError(f"LossScaler: needs init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and "
                             f"growth_interval >= 1; got {init_scale}, {growth_factor}, {backoff_factor}, "
                             f"{growth_interval}")
        self.init_scale, self.growth_factor = float(init_scale), float(growth_factor)
        self.backoff_factor, self.growth_interval = float(backoff_factor), int(growth_interval)
        self.scale = self.good_steps = self.found_inf = None

    def on(self, device) -> "LossScaler":
        """Allocate the state on `device` (once)."""
        if self.scale is None:
            self.scale = full((), self.init_scale, _F32, device)
            self.good_steps = zeros((), np.int64, device)
            self.found_inf = zeros((), np.bool_, device)
        return self

    def scaled(self, loss):
        return loss.astype(_F32) * self.scale

    def unscaled(self, grads) -> tuple:
        """-> (the gradients divided by the scale, in float32; found_inf: an expression, True where
        any element of any gradient is inf or NaN)."""
        return self.unscale(grads), self.found(grads)

    @staticmethod
    def found(grads):
        """True where any element of any gradient is inf or NaN: one reduction per gradient shape."""
        # One reduction per gradient shape, over all the gradients of that shape at once (a BatchNorm's
        # dgamma and dbeta, the convolutions of one shape; a parameter region's flat gradient is one
        # shape of its own): the same booleans as one per gradient, in far fewer launches.
        by_shape: dict = {}
        for g in grads:
            by_shape.setdefault(tuple(g.shape), []).append(g)
        found = None
        for group in by_shape.values():
            bad = ~isfinite(group[0])
            for g in group[1:]:
                bad = bad | ~isfinite(g)
            bad = any_(bad)
            found = bad if found is None else found | bad
        return found

    def unscale(self, grads) -> list:
        inverse = 1.0 / self.scale
        return [g.astype(_F32) * inverse for g in grads]

    def guarded(self, pairs, found) -> list:
        """The step's writes, each keeping the old value where the step overflowed."""
        return [(t, where(found, t, new)) for t, new in pairs]

    def updates(self, found) -> list:
        """The scale, the count of good steps and found_inf, as (tensor, new value) pairs."""
        grown = self.good_steps + 1 >= self.growth_interval
        scale = where(found, self.scale * self.backoff_factor,
                      where(grown, self.scale * self.growth_factor, self.scale))
        good = where(found | grown, 0, self.good_steps + 1)
        return [(self.scale, scale), (self.good_steps, good), (self.found_inf, found)]

    def hyperparameters(self) -> tuple:
        return (self.growth_factor, self.backoff_factor, self.growth_interval)

    def __repr__(self):
        return (f"LossScaler(init_scale={self.init_scale}, growth_factor={self.growth_factor}, "
                f"backoff_factor={self.backoff_factor}, growth_interval={self.growth_interval})")
