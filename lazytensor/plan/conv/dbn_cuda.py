"""The CBR backward's stage 1 on CUDA through the vectorized dBN kernels (lazytensor.kernels.cuda.dbn):
one step per node of lazytensor.ops.cbr_backward, each one kernel (the sums: two, the second a tiny
deterministic finish over per-block partials), all capturable by the CUDA-graph replay.

They take float16 or float32 NHWC activations with K a multiple of 8 whose arrays start on 16-byte
boundaries (every kernel access is 8 channels: 16 bytes, or two 16-byte vectors of float32); anything
else keeps the generic kernels of
lazytensor.plan.conv.cbr_backward, and `vector_refusal` says why, for explain.
"""
from __future__ import annotations

import math

import numpy as np

from lazytensor.kernels.cuda import dbn as cuda_dbn


from lazytensor.kernels import launch_log
from lazytensor.plan.steps import Step
_F32 = np.dtype(np.float32)


def vector_refusal(dtype, shape, arrays, channels=()) -> str | None:
    """Why the vectorized dBN kernels cannot run over these activations (arrays: the NHWC ones they
    would touch; channels: the per-channel vectors they would read), or None."""
    if np.dtype(dtype).name not in cuda_dbn.DTYPES:
        return (f"the vectorized dBN kernels take {' or '.join(cuda_dbn.DTYPES)} activations, not "
                f"{np.dtype(dtype).name}")
    k = shape[-1] if shape else 0
    if k % cuda_dbn.VECTOR or k == 0:
        return f"the vectorized dBN kernels take K a multiple of 8 channels; K = {k}"
    if not cuda_dbn.aligned(*arrays):
        return "the vectorized dBN kernels need 16-byte-aligned activations; an operand or the destination is not"
    for a in channels:
        if a.dtype != _F32 or tuple(a.shape) != (k,) or not a.flags.c_contiguous:
            return (f"the vectorized dBN kernels read dense float32 per-channel vectors of shape ({k},); "
                    f"got {a.dtype} {tuple(a.shape)}")
    return None


def geometry_for(backend, array, relu: bool) -> cuda_dbn.DbnGeometry:
    """The launch shapes over an (..., K) CuPy array on its device. The kernels are compiled and
    loaded here, at planning: never while a CUDA graph captures the steps."""
    shape, device_id = array.shape, array.device.id
    cuda_dbn.load(backend.compiler, relu, device_id, array.dtype)
    return cuda_dbn.dbn_geometry(math.prod(shape[:-1]), shape[-1], cuda_dbn.sm_count(device_id))


def _record(backend, what, elements, geometry):
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord(f"dbn_{what}", backend.name, "dbn", int(elements), "memory", 0.0,
                                                  geometry.describe()))


class DbnSumsStep(Step):
    """out (K, 2) float32 = [sum dY', sum dY' * x_hat] per channel: lt_dbn_sums into per-block
    partials, then lt_dbn_finish. skip (the residual form): d(skip) = dY' written by the same pass."""
    __slots__ = ("backend", "geometry", "dy", "x", "mask", "mean", "inv_var", "partial", "out", "skip")
    writes = ("partial", "out")

    def __init__(self, backend, dy, x, mask, mean, inv_var, out, skip=None):
        self.backend, self.dy, self.x, self.mask, self.mean, self.inv_var, self.out = (
            backend, dy, x, mask, mean, inv_var, out)
        self.skip = skip
        self.geometry = g = geometry_for(backend, x, mask is not None)
        self.partial = backend.empty((g.partial_rows, 2, 8 * g.V), _F32)

    def run(self):
        cuda_dbn.dbn_sums(self.backend.compiler, self.geometry, self.dy, self.x, self.mask, self.mean, self.inv_var,
                          self.partial, self.out, self.skip)
        _record(self.backend, "sums", self.out.size, self.geometry)

    def capture_refusal(self):
        return None

    def describe(self, source: bool = True) -> str:
        what = "dY' = dY * ReLU mask" if self.mask is not None else "dY' = dY (no ReLU)"
        text = (f"DbnSums on cuda: per channel sum(dY') and sum(dY' * x_hat) -> float32 {tuple(self.out.shape)}, "
                f"{what}: one read of dY, the conv output{' and the mask bits' if self.mask is not None else ''} "
                f"with 16-byte loads, float32 per thread, per-block partials summed in float64 in a fixed order "
                f"(deterministic)"
                + (f"; writes d(skip) = dY' {tuple(self.skip.shape)} {self.skip.dtype} from the same reads (no pass "
                   f"of its own)"
                   if self.skip is not None else "")
                + f"\n  note: {self.geometry.describe()}")
        if source:
            text += ("\n" + _source(self.mask is not None, "sums", self.x.dtype) + "\n"
                     + _source(self.mask is not None, "finish", self.x.dtype))
        return text


class DbnDxStep(Step):
    """out = d(conv_out) = A * dY' + B + C * (x - mean) per element, the coefficients per channel
    from gamma, inv_var and the dBN sums (lt_dbn_dx)."""
    __slots__ = ("backend", "geometry", "dy", "x", "mask", "mean", "inv_var", "gamma", "sums", "out", "count", "note")

    def __init__(self, backend, dy, x, mask, mean, inv_var, gamma, sums, out, count, note=""):
        self.backend, self.dy, self.x, self.mask, self.mean, self.inv_var, self.gamma, self.sums, self.out = (
            backend, dy, x, mask, mean, inv_var, gamma, sums, out)
        self.count, self.note = count, note
        self.geometry = geometry_for(backend, x, mask is not None)

    def run(self):
        cuda_dbn.dbn_dx(self.backend.compiler, self.geometry, self.dy, self.x, self.mask, self.mean, self.inv_var,
                        self.gamma, self.sums, self.out, self.count)
        _record(self.backend, "dx", self.out.size, self.geometry)

    def capture_refusal(self):
        return None

    def describe(self, source: bool = True) -> str:
        text = (f"DbnDx on cuda: d(conv_out) {tuple(self.out.shape)} {self.out.dtype} = gamma*inv_var*(dY' - sum_dy/n - "
                f"x_hat*sum_dyxhat/n), n = {self.count}: 16-byte loads of dY and the conv output"
                f"{', a mask byte per 8 channels' if self.mask is not None else ''}, 16-byte stores, per-channel "
                f"coefficients in registers (one subtraction and two FMAs per element); rows in the reverse "
                f"order of the sums, whose last rows are still in L2\n  note: {self.geometry.describe()}")
        if self.note:
            text += f"\n  note: {self.note}"
        if source:
            text += "\n" + _source(self.mask is not None, "dx", self.out.dtype)
        return text


class DreluStep(Step):
    """out = dY' = dY where the ReLU mask is set, else +0 (d(skip) of the residual form; lt_dbn_drelu)."""
    __slots__ = ("backend", "geometry", "dy", "mask", "out")

    def __init__(self, backend, dy, mask, out):
        self.backend, self.dy, self.mask, self.out = backend, dy, mask, out
        self.geometry = geometry_for(backend, dy, True)

    def run(self):
        cuda_dbn.dbn_drelu(self.backend.compiler, self.geometry, self.dy, self.mask, self.out)
        _record(self.backend, "drelu", self.out.size, self.geometry)

    def capture_refusal(self):
        return None

    def describe(self, source: bool = True) -> str:
        text = (f"Drelu on cuda: d(skip) = dY * ReLU mask {tuple(self.out.shape)} {self.out.dtype}: 16-byte loads "
                f"and stores, each value kept or zeroed by its mask bit")
        if source:
            text += "\n" + _source(True, "drelu", self.out.dtype)
        return text


def _source(relu: bool, role: str, dtype) -> str:
    """The kernel's CUDA C, indented, for explain."""
    name = cuda_dbn.kernel_names(relu)[role]
    body = cuda_dbn.render_dbn(relu, dtype).kernel
    start = body.index(f"{name}(")
    start = body.rindex("extern", 0, start)
    end = body.find('extern "C"', start + 1)
    return "\n".join("    " + line for line in body[start: end if end > 0 else None].rstrip().splitlines())
