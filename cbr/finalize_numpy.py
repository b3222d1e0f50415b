"""BN finalize in NumPy: the interpreter tier's twin of cbr/finalize_cpu.py, bit for bit, so that a
first training step on the CPU does not wait for numba to compile three loops over C channels.

numba's float() of a float32 element stays float32, so the loops multiply gamma by the mean (or
the running mean) in float32 and the rest in float64 (Python floats are float64 there): the twin
keeps the arrays in their dtypes and the scalars as np.float64, where NumPy's promotion gives the
same types (a Python float would not: it takes the array's dtype in NumPy 2)."""
from __future__ import annotations

import numpy as np

_ONE = np.float64(1.0)


def _not_below_zero(v):
    """max(v, 0.0) in float64: v unless 0.0 > v (NaN and -0.0 stay)."""
    v = np.asarray(v, np.float64)
    return np.where(0.0 > v, 0.0, v)


def finalize_train(mean, var, count, gamma, beta, running_mean, running_var, momentum, eps,
                   eq_scale, eq_bias, saved_mean, saved_inv_var, new_running_mean, new_running_var) -> None:
    count, momentum, eps = np.float64(count), np.float64(momentum), np.float64(eps)
    with np.errstate(all="ignore"):
        v = _not_below_zero(var)
        inv = _ONE / np.sqrt(v + eps)
        eq_scale[...] = gamma * inv
        eq_bias[...] = beta - gamma * mean * inv
        saved_mean[...] = mean
        saved_inv_var[...] = inv
        new_running_mean[...] = (_ONE - momentum) * running_mean + momentum * mean
        new_running_var[...] = (_ONE - momentum) * running_var + momentum * v * count / (count - _ONE)


def finalize_inference(gamma, beta, running_mean, running_var, eps, eq_scale, eq_bias) -> None:
    eps = np.float64(eps)
    with np.errstate(all="ignore"):
        inv = _ONE / np.sqrt(running_var + eps)
        eq_scale[...] = gamma * inv
        eq_bias[...] = beta - running_mean * gamma * inv


def commit_running(new_running_mean, new_running_var, running_mean, running_var) -> None:
    """The staged statistics into place; the caller holds interrupts back around it (two copies)."""
    np.copyto(running_mean, new_running_mean, casting="unsafe")
    np.copyto(running_var, new_running_var, casting="unsafe")
