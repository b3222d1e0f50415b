"""CBR stage 1 on CUDA, chosen by measurement per shape: one cuDNN graph computing the conv and its
per-channel sums (conv_fprop + genstats), or the fastest plain conv followed by lazytensor's own
statistics reduction (one read of the conv output). Fusing genstats narrows cuDNN's engines, so
neither wins everywhere. The choice is timed once per shape (CUDA events around short bursts of
back-to-back calls, so host costs count where the host is the bottleneck), kept
in memory and in the disk cache (cbr_stage1.json, checked when read: a damaged file is reported
once and measured again); LAZYTENSOR_CBR_TUNE=0 takes conv + genstats without timing.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.kernels.timing import burst_ms
from lazytensor.kernels.program import Reduction
from lazytensor.plan.lower import lower
from lazytensor.plan.measured_choice import MeasuredChoices, device_name
from lazytensor.plan.steps import FusedReduction

GENSTATS = "conv_fprop + genstats"
REDUCTION = "conv + statistics reduction"
_F32 = np.dtype(np.float32)


def statistics_step(backend, y, device, dtype=_F32):
    """Per-channel mean and biased variance of y (channels last) by lazytensor's own reduction,
    accumulated in float64, as `dtype`."""
    spec = Reduction("meanvar", tuple(range(y.ndim - 1)), tuple(y.shape), np.dtype(np.float64), np.dtype(dtype))
    stats = backend.empty((2, y.shape[-1]), dtype)
    program, inputs, scalars = lower(_tensor.Tensor(y, device), y.dtype)
    return FusedReduction(backend, program, spec, stats, inputs, scalars,
                          note="per-channel mean and variance in one read of the conv output"), stats


def _valid(value) -> bool:
    return (isinstance(value, list) and len(value) == 2 and value[0] in (GENSTATS, REDUCTION)
            and isinstance(value[1], str))


_CHOICES = MeasuredChoices("cbr_stage1.json", _valid, (GENSTATS, "LAZYTENSOR_CBR_TUNE=0: not timed"))
_DISK = _CHOICES.disk


def _device_name(device_id: int) -> str:
    return device_name(device_id)


def choose_stage1(backend, x, w, attrs, y):
    """-> (GENSTATS or REDUCTION, a note with the measured times or why none were taken)."""
    key = f"{_device_name(x.data.device.id)}|{x.shape}|{w.shape}|{attrs.stride}|{attrs.padding}|{attrs.dilation}"
    return _CHOICES.choose(key, lambda: _measure(backend, x, w, attrs, y))


def _measure(backend, x, w, attrs, y):
    from lazytensor.cbr import cudnn_conv
    k = w.shape[0]
    sums = [backend.empty((k,), _F32) for _ in range(2)]
    a = attrs

    def genstats():
        cudnn_conv.conv2d_genstats(x.data, w.data, a.stride, a.padding, a.dilation, out=y,
                                   sum_out=sums[0], sum_sq_out=sums[1])

    reduction, _ = statistics_step(backend, y, "cuda")

    def conv_then_reduce():
        cudnn_conv.conv2d(x.data, w.data, a.stride, a.padding, a.dilation, out=y)
        reduction.run()

    t_gen = burst_ms(genstats, bursts=3, burst=5, warmup=1)
    t_red = burst_ms(conv_then_reduce, bursts=3, burst=5, warmup=1)
    choice = GENSTATS if t_gen <= t_red else REDUCTION
    return choice, f"measured: conv+genstats {t_gen:.3f} ms, conv + reduction {t_red:.3f} ms", True


def genstats_refusal(dtype) -> str | None:
    """Why stage 1 cannot be the conv_fprop + genstats graph in this dtype, or None (float16)."""
    from lazytensor.cbr.cudnn_dtypes import graph_refusal
    return graph_refusal("conv_genstats", dtype)
