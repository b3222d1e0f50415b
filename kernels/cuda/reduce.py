"""Fused reductions on the CUDA backend: plan (cuda_reduce_layout), render (render_cuda_reduce), compile
through the backend's NVRTC compiler and cubin cache, launch on CuPy's current stream. Nothing here
synchronizes the host.

Kernels are cached by structure (program, accumulator, output dtype, ReduceLayout), never by sizes;
the launch plan of each (program, reduction, operand shapes/strides/alignment, device) is cached too,
so a repeated reduction costs one dictionary lookup, a scratch allocation from CuPy's pool when it
has chunks, and one or two launches.
"""
from __future__ import annotations

import time

import numpy as np

from lazytensor.kernels import launch_log
from lazytensor.kernels.cuda.kernel import CudaKernel, scalar_arguments, scalar_converters
from lazytensor.kernels.cuda.layout import BLOCK
from lazytensor.kernels.cuda.reduce_layout import MOMENT_LANES, ReduceGeometry, plan_finish, plan_reduction
from lazytensor.kernels.program import ElementwiseProgram, Reduction
from lazytensor.kernels.cuda.render_cuda_reduce import render_cuda_finish, render_cuda_reduce, state_dtype

_MAX_LAUNCH_PLANS = 4096
_plans: dict = {}
_sm_counts: dict = {}


class ReductionLaunch:
    """Everything about one reduction's launches that does not change between runs."""
    __slots__ = ("main", "main_kernel", "grid", "tail", "finish", "finish_kernel", "finish_grid", "finish_tail",
                 "geometry", "scratch_dtype", "converters", "compiled", "plan_seconds", "reported")

    def __init__(self, main, main_kernel, geometry: ReduceGeometry, spec: Reduction, converters):
        self.main, self.main_kernel, self.geometry = main, main_kernel, geometry
        index = np.int64 if geometry.layout.index64 else np.int32
        count = float(geometry.R)
        finals = (np.float64(count), np.float64(max(count - spec.ddof, 0.0)))
        self.grid = geometry.grid
        self.tail = tuple(index(v) for v in geometry.runtime_args) + finals
        self.converters = converters
        self.scratch_dtype = state_dtype(spec)
        self.finish = self.finish_kernel = None
        self.finish_grid = self.finish_tail = None
        self.compiled = []          # (kernel, how it was obtained, seconds) of the kernels built for this plan
        self.plan_seconds = 0.0     # the time taken to make this plan, compiles included
        self.reported = False       # whether lt.profile has seen how those kernels were obtained

    def set_finish(self, function, kernel, layout, grid):
        index = np.int64 if layout.index64 else np.int32
        self.finish, self.finish_kernel, self.finish_grid = function, kernel, grid
        self.finish_tail = (index(self.geometry.K), index(self.geometry.chunks)) + self.tail[-2:]

    def config(self) -> str:
        text = self.geometry.config()
        if self.finish is not None:
            text += f"; combining kernel grid={self.finish_grid}, block=({BLOCK},)"
        return text


def _operands(inputs) -> list:
    return [(a.shape, a.strides, a.data.ptr) for a in inputs]


def _kernel(backend, key, render):
    """A CudaKernel from the backend's cache, built (NVRTC or the disk cache) on a miss."""
    built = []

    def build():
        rendered = render()
        cubin, path, cache, seconds = backend.compiler.cubin(rendered)
        built.append((cache, seconds))
        return CudaKernel(rendered, cubin, path, cache, seconds)

    kernel = backend.kernels.get_or_build(key, build)
    return kernel, (built[0] if built else ("memory", 0.0))


def _main_key(program, spec, layout):
    return ("reduce", program, spec.kind, spec.acc_dtype, spec.out_dtype, spec.root, layout)


def plan(backend, program: ElementwiseProgram, spec: Reduction, inputs, device_id: int) -> ReductionLaunch:
    """Build (or compile) everything a reduction needs; cached by the caller."""
    cp = backend._cupy
    sm_count = _sm_counts.get(device_id)
    if sm_count is None:
        sm_count = _sm_counts[device_id] = cp.cuda.Device(device_id).attributes["MultiProcessorCount"]
    itemsizes = [np.dtype(d).itemsize for d in program.input_dtypes()]
    operands = _operands(inputs)
    # The layout does not depend on the occupancy; the chunk count does: plan, compile, measure, re-plan.
    lanes = MOMENT_LANES if spec.kind in ("var", "meanvar") else None
    provisional = plan_reduction(spec.in_shape, spec.axes, operands, itemsizes, sm_count, 1, lanes)
    kernel, how = _kernel(backend, _main_key(program, spec, provisional.layout),
                          lambda: render_cuda_reduce(program, spec, provisional.layout))
    function = backend._function(kernel, device_id)
    with cp.cuda.Device(device_id):
        resident = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(function.ptr, BLOCK, 0)
    geometry = plan_reduction(spec.in_shape, spec.axes, operands, itemsizes, sm_count, max(1, resident), lanes)
    launch = ReductionLaunch(function, kernel, geometry, spec, scalar_converters(program))
    launch.compiled.append((kernel, *how))
    if geometry.chunks > 1:
        layout, grid = plan_finish(geometry.K, geometry.chunks)
        finish, how = _kernel(backend, ("reduce-finish", spec.kind, spec.acc_dtype, spec.out_dtype, spec.root, layout),
                              lambda: render_cuda_finish(spec, layout))
        launch.set_finish(backend._function(finish, device_id), finish, layout, grid)
        launch.compiled.append((finish, *how))
    return launch


def _launch_plan(backend, program, spec, inputs, device_id) -> ReductionLaunch:
    key = (program, spec, device_id, *[(a.shape, a.strides, not (a.data.ptr & 15)) for a in inputs])
    launch = _plans.get(key)
    if launch is not None:
        return launch
    started = time.perf_counter()
    launch = plan(backend, program, spec, inputs, device_id)
    launch.plan_seconds = time.perf_counter() - started
    if len(_plans) >= _MAX_LAUNCH_PLANS:
        _plans.clear()
    _plans[key] = launch
    return launch


def scratch_for(backend, program: ElementwiseProgram, spec: Reduction, out, inputs):
    """The scratch memory run_reduction needs for these operands (the partial results of a reduction
    split over several blocks per output), or None: a plan takes it once and passes it on each run."""
    if out.size == 0:
        return None
    launch = _launch_plan(backend, program, spec, inputs, out.data.device_id)
    if launch.finish is None:
        return None
    geometry = launch.geometry
    return backend.empty((geometry.chunks * geometry.K * launch.scratch_dtype.itemsize,), np.uint8)


def run_reduction(backend, program: ElementwiseProgram, spec: Reduction, out, inputs, scalars, scratch=None) -> None:
    """Evaluate `program` over spec.in_shape and reduce it into `out` (spec.out_shape, or (2,) + it for
    meanvar), on CuPy's current stream. scratch: from scratch_for, else taken from the pool here."""
    if out.size == 0:
        return
    launch = _launch_plan(backend, program, spec, inputs, out.data.device_id)
    geometry = launch.geometry
    target = out if out.flags.c_contiguous else backend.empty(out.shape, out.dtype)
    if launch.finish is not None and scratch is None:
        scratch = backend.empty((geometry.chunks * geometry.K * launch.scratch_dtype.itemsize,), np.uint8)
    args = [a.data for a in inputs]
    args += scalar_arguments(launch.converters, scalars)
    args += [scratch, target]
    args += launch.tail
    launch.main(launch.grid, (BLOCK,), args)
    if launch.finish is not None:
        launch.finish(launch.finish_grid, (BLOCK,), [scratch, target, *launch.finish_tail])
    if target is not out:
        out[...] = target
    if launch_log.listeners:
        cache, seconds = "memory", 0.0
        if not launch.reported:     # the first run of this plan says how its kernels were obtained
            launch.reported = True
            caches = [how for _, how, _ in launch.compiled]
            cache = "compiled" if "compiled" in caches else ("disk" if "disk" in caches else "memory")
            seconds = launch.plan_seconds if cache != "memory" else 0.0
        launch_log.record(launch_log.KernelRecord(launch.main_kernel.name, "cuda", "reduction",
                                                  geometry.K * geometry.R, cache, seconds, launch.config()))


def explain_reduction(backend, program: ElementwiseProgram, spec: Reduction, out, inputs) -> str:
    """The launch configuration and the source of the kernels run_reduction would launch."""
    launch = _launch_plan(backend, program, spec, inputs, out.data.device_id)
    geometry = launch.geometry
    lay = geometry.layout
    loads = (f"{lay.vector}-element vector loads, {lay.unroll} in flight per thread" if lay.vector > 1 else
             "scalar loads" + (f" ({'; '.join(geometry.notes)})" if geometry.notes else "")
             + f", {lay.unroll} in flight per thread")
    text = (f"cuda reduction kernel {launch.main_kernel.name}: {launch.config()}; {loads}; "
            f"{'64' if lay.index64 else '32'}-bit indexing; kept extents {geometry.kept_extents}, "
            f"reduced extents {geometry.reduced_extents}\n{launch.main_kernel.source}")
    if launch.finish is not None:
        text += f"\ncombining kernel {launch.finish_kernel.name}:\n{launch.finish_kernel.rendered.kernel}"
    return text
