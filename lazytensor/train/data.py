"""Batches for training, resident on the device: a fixed set of random batches (synthetic), or
CIFAR-10 shuffled on the device each epoch, augmented on the device and normalized.

Each source is an endless iterator of (images, labels): images float32 NHWC, labels int64 (N,).
Augmented and normalized images are expressions: lt.train_step copies each batch into its static
input buffer, and that copy is the one kernel that crops, flips and normalizes. Nothing goes through
the host per step: the data are copied to the device once, and the random draws (the epoch's order
excepted, a permutation sent once per epoch) are made there.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import asarray
from lazytensor.ops import random as lt_random
from lazytensor.ops.indexing import take
from lazytensor.train.augment import RandomCropFlip
from lazytensor.train.cifar10 import MEAN, STD


class SyntheticBatches:
    """`count` batches of standard normal images and uniform labels in [0, num_classes), drawn
    once on the device (lt.random, seeded) and cycled through; with `augment`, each batch is
    randomly cropped and flipped as it is handed out (to measure what augmentation costs)."""

    def __init__(self, batch: int, px: int, num_classes: int, device=None, count: int = 4, seed: int = 0,
                 augment: bool = False):
        rng = lt_random.default_rng(seed, device)
        self.batches = [(rng.standard_normal((batch, px, px, 3), dtype=np.float32),
                         rng.integers(0, num_classes, batch)) for _ in range(count)]
        self.batch = batch
        self.augment = RandomCropFlip(4, seed=seed + 1, device=self.batches[0][0].device) if augment else None

    def describe(self) -> str:
        how = ", random crop and flip on the device" if self.augment else ""
        return f"synthetic data ({len(self.batches)} random batches resident on the device{how})"

    def __iter__(self):
        while True:
            for x, labels in self.batches:
                yield (x if self.augment is None else self.augment(x)), labels


class CifarBatches:
    """CIFAR-10 images (uint8 NHWC, as load_cifar10 returns them) copied to the device once. Each
    epoch is a new order (one gather on the device); a batch is a slice of it, augmented (random
    crop with 4-pixel zero padding and horizontal flip) when `augment`, then scaled to [0, 1] and
    normalized by the training set's per-channel mean and standard deviation, in one fused kernel.
    The last incomplete batch of an epoch is dropped, so every batch has the same shape."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, batch: int, device=None, augment: bool = True,
                 seed: int = 0):
        if len(images) < batch:
            raise ValueError(f"batch {batch} is larger than the data set ({images.shape[0]} images): "
                             f"use a smaller --batch")
        self.images = asarray(images, device=device)
        self.labels = asarray(labels.astype(np.int64), device=device)
        device = self.images.device
        self.batch = batch
        self.order = np.random.default_rng(seed)
        self.augment = RandomCropFlip(4, seed=seed + 1, device=device) if augment else None
        self.mean = asarray(np.asarray(MEAN, np.float32), device=device)
        self.scale = asarray((1.0 / (255.0 * np.asarray(STD))).astype(np.float32), device=device)

    def describe(self) -> str:
        how = "random crop and flip on the device" if self.augment else "no augmentation"
        return f"CIFAR-10, {self.images.shape[0]} images resident on the device ({how})"

    def normalize(self, x):
        """uint8 pixels -> (x / 255 - mean) / std, float32 (an expression)."""
        return (x.astype(np.float32) - self.mean * 255.0) * self.scale

    def test_accuracy(self, model, images: np.ndarray, labels: np.ndarray) -> float:
        """The fraction of `images` (uint8 NHWC, e.g. CIFAR-10's test_batch) that `model` classifies
        as `labels`, in eval mode (BatchNorm's running statistics), normalized as the training
        batches, in batches of this source's size (the last one smaller). The model is left in
        training mode."""
        from lazytensor.ops.reductions import argmax
        dtype = model.parameters()[0].dtype               # float16 under AMP
        model.eval()
        try:
            correct = 0
            for start in range(0, len(images), self.batch):
                x = asarray(images[start:start + self.batch], device=self.images.device)
                y = asarray(labels[start:start + self.batch].astype(np.int64), device=self.images.device)
                correct += int((argmax(model(self.normalize(x).astype(dtype)), axis=1) == y).sum())
        finally:
            model.train()
        return correct / len(images)

    def __iter__(self):
        n = self.images.shape[0] // self.batch * self.batch
        while True:
            perm = self.order.permutation(self.images.shape[0])
            images, labels = take(self.images, perm, axis=0), take(self.labels, perm, axis=0)
            for start in range(0, n, self.batch):
                x = images[start:start + self.batch]
                if self.augment is not None:
                    x = self.augment(x)
                yield self.normalize(x), labels[start:start + self.batch]
