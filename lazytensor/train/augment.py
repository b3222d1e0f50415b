"""On-device augmentation of NHWC image batches: random crop with zero padding and random horizontal
flip, as torchvision's RandomCrop(32, padding=4) + RandomHorizontalFlip() on CIFAR-10.

Built from lazytensor's own ops, so it runs on the batch's device with no host round trip and no
host sync: the random draws are tensors (lt.random), and each sample's choice is a `where` over the
few possible shifts, so the per-sample offsets never leave the device. The crop is two fused kernels
(one picks the rows, the other the columns); the flip and whatever follows (casting, normalizing)
fuse into the second.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import Tensor, zeros
from lazytensor.ops import random as lt_random
from lazytensor.ops.elementwise import where
from lazytensor.assign.evaluate import evaluate


def _nhwc(x, what: str):
    if x.ndim != 4:
        raise ValueError(f"{what}: expected an NHWC batch (4 axes), got shape {tuple(x.shape)}")
    return x.shape


def _per_sample(v, n: int, name: str, what: str):
    """A (N,) draw as (N, 1, 1, 1), to broadcast against an NHWC batch."""
    if tuple(v.shape) != (n,):
        raise ValueError(f"{what}: {name} must have one value per sample, shape ({n},); got {tuple(v.shape)}")
    return v.reshape(n, 1, 1, 1)


def pad(x, padding: int) -> Tensor:
    """x (N, H, W, C) with `padding` zeros on each side of H and W: a new tensor."""
    n, h, w, c = _nhwc(x, "pad")
    if padding < 0:
        raise ValueError(f"pad: padding must be >= 0, got {padding}")
    out = zeros((n, h + 2 * padding, w + 2 * padding, c), x.dtype, x.device)
    out[:, padding:padding + h, padding:padding + w, :] = x
    return out


def crop(x, dy, dx, padding: int = 4):
    """Sample i of the result is the H x W window of x zero-padded by `padding`, starting at row
    dy[i] and column dx[i] (integers in [0, 2 * padding]; padding, padding is the uncropped image).
    Returns an expression (the column choice), so what follows fuses into its kernel."""
    n, h, w, c = _nhwc(x, "crop")
    dy = _per_sample(dy, n, "dy", "crop")
    dx = _per_sample(dx, n, "dx", "crop")
    padded = pad(x, padding)
    rows = padded[:, 0:h]
    for k in range(1, 2 * padding + 1):
        rows = where(dy == k, padded[:, k:k + h], rows)
    rows = evaluate(rows)                 # (N, H, W + 2p, C): the columns' choice reads it 2p + 1 times
    cols = rows[:, :, 0:w]
    for k in range(1, 2 * padding + 1):
        cols = where(dx == k, rows[:, :, k:k + w], cols)
    return cols


def flip_horizontal(x, flips):
    """Sample i of x mirrored left to right where flips[i] is true (an expression)."""
    n = _nhwc(x, "flip_horizontal")[0]
    flips = _per_sample(flips, n, "flips", "flip_horizontal")
    return where(flips, x[:, :, ::-1, :], x)


class RandomCropFlip:
    """Draws, per sample, a crop offset (dy, dx) uniform in [0, 2 * padding] and a flip with
    probability 1/2 from lt.random's generator on `device` (seeded), and applies them:
    `aug(x)` is crop then flip, an expression. `draw(n)` returns the draws (dy, dx, flips) in the
    order they are taken: dy, then dx, then flips."""

    def __init__(self, padding: int = 4, seed=0, device=None):
        if padding < 0:
            raise ValueError(f"RandomCropFlip: padding must be >= 0, got {padding}")
        self.padding = padding
        self.rng = lt_random.default_rng(seed, device)

    def draw(self, n: int):
        dy = self.rng.integers(0, 2 * self.padding + 1, n)
        dx = self.rng.integers(0, 2 * self.padding + 1, n)
        flips = self.rng.random(n, dtype=np.float32) < 0.5
        return dy, dx, flips

    def __call__(self, x):
        dy, dx, flips = self.draw(x.shape[0])
        return flip_horizontal(crop(x, dy, dx, self.padding), flips)
