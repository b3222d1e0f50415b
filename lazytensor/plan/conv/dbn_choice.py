"""CBR backward stage 1 on CUDA, chosen by measurement per shape, as the forward's stage 1
(lazytensor.plan.conv.stage1): lazytensor's own kernels (the dBN sums reduction, then the
d(conv_out) kernel, each reading the 1-bit mask) or one cuDNN graph (the mask as BOOLEAN scaling dY,
feeding batchnorm_backward: cbr/cudnn_dbn.py). The choice is timed once per (GPU, shape) with CUDA
events around short bursts, kept in memory and in the disk cache; LAZYTENSOR_CBR_TUNE=0 takes the
own kernels without timing (they take every shape, and one read + one write of the output costs
less than the graph measured on the H200, ../shared/gpu/README.md). Explain shows the choice and
the times.
"""
from __future__ import annotations

from lazytensor.plan.measured_choice import MeasuredChoices

OWN = "own kernels: dBN sums reduction + d(conv_out) kernel"
CUDNN = "cuDNN dbn_relu graph (BOOLEAN mask scaling dY, batchnorm_backward)"


def _valid(value) -> bool:
    return isinstance(value, list) and len(value) == 2 and value[0] in (OWN, CUDNN) and isinstance(value[1], str)


_CHOICES = MeasuredChoices("cbr_dbn.json", _valid, (OWN, "LAZYTENSOR_CBR_TUNE=0: not timed"))
_DISK = _CHOICES.disk


def choose_dbn(shape, device_id: int, run_own, run_graph):
    """-> (OWN or CUDNN, a note with the measured times or why none were taken). run_own and run_graph
    enqueue one stage 1 each on the current stream; run_graph may raise CudnnGraphRejected."""
    from lazytensor.plan.conv.stage1 import _device_name
    return _CHOICES.choose(f"{_device_name(device_id)}|{tuple(shape)}", lambda: _measure(run_own, run_graph))


def _measure(run_own, run_graph):
    from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
    from lazytensor.kernels.timing import burst_ms
    t_own = burst_ms(run_own, bursts=3, burst=5, warmup=1)
    try:
        t_graph = burst_ms(run_graph, bursts=3, burst=5, warmup=1)
    except CudnnGraphRejected as e:     # not kept on disk: a rejection is not a measurement
        return OWN, f"cuDNN rejected the dbn_relu graph: {e.reason}; own kernels {t_own:.3f} ms", False
    choice = CUDNN if t_graph < t_own else OWN
    return choice, f"measured: own kernels {t_own:.3f} ms, cuDNN dbn_relu graph {t_graph:.3f} ms", True
