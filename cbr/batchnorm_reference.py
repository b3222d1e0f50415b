"""Training-mode batch normalisation over the channel (last) axis, in float64: the oracle, and the
finalize step that turns per-channel sums into the affine map the apply kernel uses.

Design: docs/design/cbr.md, section "cbr/batchnorm_reference.py".
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class BatchNormTrainResult(NamedTuple):
    y: np.ndarray  # float64, x's shape
    saved_mean: np.ndarray  # float32 (C,)
    saved_inv_var: np.ndarray  # float32 (C,): 1/sqrt(var + eps)
    running_mean: np.ndarray  # the updated running statistics (new arrays, running dtype)
    running_var: np.ndarray


class BatchNormFinalized(NamedTuple):
    eq_scale: np.ndarray  # float32 (C,)
    eq_bias: np.ndarray  # float32 (C,)
    saved_mean: np.ndarray  # float32 (C,)
    saved_inv_var: np.ndarray  # float32 (C,)


def check_count(count: int) -> int:
    count = int(count)
    if count < 2:
        raise ValueError(
            f"batch_norm in training mode needs more than one value per channel (N*H*W = {count}): "
            "the unbiased variance for the running statistics divides by n - 1"
        )
    return count


def check_vectors(channels: int, **vectors) -> dict[str, np.ndarray]:
    """Every per-channel vector as a 1-D array of length `channels`, or a ValueError naming it."""
    out = {}
    for name, v in vectors.items():
        a = np.asarray(v)
        if a.shape != (channels,):
            raise ValueError(f"{name} must have shape ({channels},), one value per channel; got {a.shape}")
        out[name] = a
    return out


def check_running(channels: int, running_mean, running_var) -> None:
    """The running statistics are updated in place, so they must be writable float arrays of length C."""
    for name, a in (("running_mean", running_mean), ("running_var", running_var)):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{name} must be a NumPy array (it is updated in place); got {type(a).__name__}")
        if a.shape != (channels,):
            raise ValueError(f"{name} must have shape ({channels},), one value per channel; got {a.shape}")
        if a.dtype.kind != "f":
            raise TypeError(f"{name} must be a floating-point array; got {a.dtype}")
        if not a.flags.writeable:
            raise ValueError(f"{name} is read-only; it is updated in place")


def batchnorm_train_reference(x, gamma, beta, running_mean, running_var, momentum=0.1, eps=1e-5) -> BatchNormTrainResult:
    """The direct formula in float64; returns new running statistics and leaves the inputs untouched."""
    x64 = np.asarray(x, dtype=np.float64)
    if x64.ndim < 1:
        raise ValueError("batch_norm needs at least one axis (the channel axis, last)")
    channels = x64.shape[-1]
    count = check_count(x64.size // max(channels, 1))
    v = check_vectors(channels, gamma=gamma, beta=beta, running_mean=running_mean, running_var=running_var)
    axes = tuple(range(x64.ndim - 1))
    mean = x64.mean(axis=axes)
    var = ((x64 - mean) ** 2).mean(axis=axes)
    inv_std = 1.0 / np.sqrt(var + eps)
    y = (x64 - mean) * inv_std * v["gamma"].astype(np.float64) + v["beta"].astype(np.float64)
    rm, rv = v["running_mean"], v["running_var"]
    new_rm = ((1.0 - momentum) * rm.astype(np.float64) + momentum * mean).astype(rm.dtype)
    new_rv = ((1.0 - momentum) * rv.astype(np.float64) + momentum * var * count / (count - 1)).astype(rv.dtype)
    return BatchNormTrainResult(y, mean.astype(np.float32), inv_std.astype(np.float32), new_rm, new_rv)


def bn_finalize(sum, sumsq, count, gamma, beta, running_mean, running_var, momentum=0.1, eps=1e-5) -> BatchNormFinalized:
    """From per-channel sum and sum of squares of n = count values: the affine map and the saved statistics.

    Accumulates in float64, returns float32 vectors, and updates running_mean and running_var in place
    (both or neither: every check runs before the first write).
    """
    s = np.asarray(sum)
    if s.ndim != 1:
        raise ValueError(f"sum must be a vector, one value per channel; got shape {s.shape}")
    channels = s.shape[0]
    count = check_count(count)
    v = check_vectors(channels, sumsq=sumsq, gamma=gamma, beta=beta)
    check_running(channels, running_mean, running_var)

    mean = s.astype(np.float64) / count
    # E[x^2] - mean^2 can come out a hair below zero from rounding in the sums; a variance cannot.
    var = np.maximum(v["sumsq"].astype(np.float64) / count - mean * mean, 0.0)
    inv_std = 1.0 / np.sqrt(var + eps)
    gamma64 = v["gamma"].astype(np.float64)
    eq_scale = gamma64 * inv_std
    eq_bias = v["beta"].astype(np.float64) - gamma64 * mean * inv_std

    new_rm = (1.0 - momentum) * running_mean.astype(np.float64) + momentum * mean
    new_rv = (1.0 - momentum) * running_var.astype(np.float64) + momentum * var * count / (count - 1)
    running_mean[...] = new_rm
    running_var[...] = new_rv
    f32 = np.float32
    return BatchNormFinalized(eq_scale.astype(f32), eq_bias.astype(f32), mean.astype(f32), inv_std.astype(f32))
