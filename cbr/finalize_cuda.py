"""BN finalize on the GPU: the same tiny kernel as cbr/finalize_cpu.py, as CUDA C through CuPy.

Training takes either the cuDNN genstats sums (sum and sum of squares, float32) or the mean and
variance of lazytensor's own statistics reduction; one thread per channel, double arithmetic.
"""
from __future__ import annotations

import functools

import numpy as np

_SOURCE = r"""
extern "C" __global__ void bn_finalize_train(
    const float* a, const float* b, const int from_sums, const double count,
    const float* gamma, const float* beta, const float* running_mean, const float* running_var,
    const double momentum, const double eps,
    float* eq_scale, float* eq_bias, float* saved_mean, float* saved_inv_var,
    float* new_running_mean, float* new_running_var, const int channels)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    double mean, var;
    if (from_sums) { mean = a[c] / count; var = b[c] / count - mean * mean; }
    else { mean = a[c]; var = b[c]; }
    if (var < 0.0) var = 0.0;                  // E[x^2] - mean^2 can round a hair below zero
    double inv = 1.0 / sqrt(var + eps);
    double g = gamma[c];
    eq_scale[c] = (float)(g * inv);
    eq_bias[c] = (float)(beta[c] - g * mean * inv);
    saved_mean[c] = (float)mean;
    saved_inv_var[c] = (float)inv;
    new_running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * mean);
    new_running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * var * count / (count - 1.0));
}

// The plan's last step: both staged running statistics into place, in one launch.
extern "C" __global__ void bn_commit_running(
    const float* new_running_mean, const float* new_running_var, float* running_mean, float* running_var,
    const int channels)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    running_mean[c] = new_running_mean[c];
    running_var[c] = new_running_var[c];
}

extern "C" __global__ void bn_finalize_inference(
    const float* gamma, const float* beta, const float* running_mean, const float* running_var,
    const double eps, float* eq_scale, float* eq_bias, const int channels)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    double inv = 1.0 / sqrt((double)running_var[c] + eps);
    double g = gamma[c];
    eq_scale[c] = (float)(g * inv);
    eq_bias[c] = (float)(beta[c] - running_mean[c] * g * inv);
}
"""


@functools.lru_cache(maxsize=None)
def _kernels(device_id: int):
    import cupy
    with cupy.cuda.Device(device_id):
        module = cupy.RawModule(code=_SOURCE)
        return (module.get_function("bn_finalize_train"), module.get_function("bn_finalize_inference"),
                module.get_function("bn_commit_running"))


def _grid(channels: int):
    return ((channels + 127) // 128,), (128,)


def finalize_train(a, b, from_sums: bool, count: int, gamma, beta, running_mean, running_var, momentum, eps,
                   eq_scale, eq_bias, saved_mean, saved_inv_var, new_running_mean, new_running_var):
    k = int(gamma.shape[0])
    train = _kernels(gamma.device.id)[0]
    train(*_grid(k), (a, b, np.int32(from_sums), np.float64(count), gamma, beta, running_mean, running_var,
                      np.float64(momentum), np.float64(eps), eq_scale, eq_bias, saved_mean, saved_inv_var,
                      new_running_mean, new_running_var, np.int32(k)))


def commit_running(new_running_mean, new_running_var, running_mean, running_var):
    k = int(running_mean.shape[0])
    commit = _kernels(running_mean.device.id)[2]
    commit(*_grid(k), (new_running_mean, new_running_var, running_mean, running_var, np.int32(k)))


def finalize_inference(gamma, beta, running_mean, running_var, eps, eq_scale, eq_bias):
    k = int(gamma.shape[0])
    infer = _kernels(gamma.device.id)[1]
    infer(*_grid(k), (gamma, beta, running_mean, running_var, np.float64(eps), eq_scale, eq_bias, np.int32(k)))


SOURCE = _SOURCE
