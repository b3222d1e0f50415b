"""BN finalize on the CPU: from per-channel batch statistics to the affine map of the apply step.

A tiny fixed kernel over C channels (numba, compiled on first use so that importing lazytensor does
not import numba): it runs between the statistics and the fused
apply + ReLU + mask kernel. It computes the new running statistics into staging vectors; the plan
commits them last (commit_running: one call, so an interrupt cannot fall between the mean and the
variance), so a failure in between leaves the running statistics untouched.
"""
from __future__ import annotations

import functools
import math


def finalize_train(*args) -> None:
    _compiled()[0](*args)


def finalize_inference(*args) -> None:
    _compiled()[1](*args)


def commit_running(*args) -> None:
    """(new_running_mean, new_running_var, running_mean, running_var): the staged running statistics
    into place, in one call (KeyboardInterrupt is delivered between Python calls, never inside)."""
    _compiled()[2](*args)


# Called with each numba dispatcher once made: lazytensor's planner gives them the checked disk
# cache every kernel has (lazytensor.kernels.cpu.numba_cache); cbr itself imports nothing of kernels/.
prepare_dispatcher = None


@functools.cache
def _compiled():
    from numba import njit
    kernels = tuple(njit(cache=True)(f) for f in (_finalize_train, _finalize_inference, _commit_running))
    if prepare_dispatcher is not None:
        for kernel in kernels:
            prepare_dispatcher(kernel)
    return kernels


def _finalize_train(mean, var, count, gamma, beta, running_mean, running_var, momentum, eps,
                   eq_scale, eq_bias, saved_mean, saved_inv_var, new_running_mean, new_running_var):
    """mean, var: float32 (C,) batch mean and biased variance of `count` values per channel. The
    updated running statistics go to new_running_*, committed by the caller once all else ran."""
    for c in range(mean.shape[0]):
        m = float(mean[c])
        v = max(float(var[c]), 0.0)
        inv = 1.0 / math.sqrt(v + eps)
        g = float(gamma[c])
        eq_scale[c] = g * inv
        eq_bias[c] = float(beta[c]) - g * m * inv
        saved_mean[c] = m
        saved_inv_var[c] = inv
        new_running_mean[c] = (1.0 - momentum) * float(running_mean[c]) + momentum * m
        new_running_var[c] = (1.0 - momentum) * float(running_var[c]) + momentum * v * count / (count - 1.0)


def _finalize_inference(gamma, beta, running_mean, running_var, eps, eq_scale, eq_bias):
    for c in range(gamma.shape[0]):
        inv = 1.0 / math.sqrt(float(running_var[c]) + eps)
        g = float(gamma[c])
        eq_scale[c] = g * inv
        eq_bias[c] = float(beta[c]) - float(running_mean[c]) * g * inv


def _commit_running(new_running_mean, new_running_var, running_mean, running_var):
    for c in range(running_mean.shape[0]):
        running_mean[c] = new_running_mean[c]
        running_var[c] = new_running_var[c]
