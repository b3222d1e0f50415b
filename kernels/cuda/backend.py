"""The CUDA backend: CuPy arrays and memory pool, kernels rendered as CUDA C (render_cuda), compiled
by NVRTC to cubins (cuda_compile) and launched on CuPy's current stream. Nothing here synchronizes
the host except to_host and synchronize.

Per assignment the work is one dictionary lookup and one launch: the launch plan of each
(program, shapes, strides, alignment) — kernel function, grid, the integer arguments — is cached,
and the common all-contiguous case is recognised without reading shapes or strides. The launch is
the driver's cuLaunchKernel over parameters packed in place (cuda_raw_launch: CuPy's Function call
would convert every argument again), CuPy's call where that path refuses.
"""
from __future__ import annotations

import math

import numpy as np

from lazytensor.kernels.cuda import reduce as cuda_reduce

from lazytensor.kernels import launch_log
from lazytensor.kernels.backend import Backend
from lazytensor.kernels.cache import KernelCache, report_damaged
from lazytensor.kernels.cuda.device_memory import DeviceOutOfMemory, is_out_of_memory
from lazytensor.kernels.cuda.compile import CubinCompiler
from lazytensor.kernels.cuda.kernel import CudaKernel, scalar_converters
from lazytensor.kernels.cuda.layout import CONTIGUOUS, LaunchGeometry, flat_geometry, plan_launch
from lazytensor.kernels.cuda.raw_launch import RawLaunch
from lazytensor.kernels.cuda.render_cuda import render_cuda

_F16 = np.dtype(np.float16)
_MAX_LAUNCH_PLANS = 4096      # distinct (program, size/shape) plans kept before the table is reset


class CudaLaunch:
    """Everything about one launch that does not change between assignments."""
    __slots__ = ("function", "grid", "block", "tail", "kernel", "geometry", "config", "raw")

    def __init__(self, function, kernel, geometry: LaunchGeometry, index_type, raw: RawLaunch):
        self.function = function
        self.kernel = kernel
        self.geometry = geometry
        self.grid = (geometry.grid,)
        self.block = (geometry.block,)
        self.tail = tuple(index_type(v) for v in geometry.runtime_args)
        self.config = geometry.config()
        self.raw = raw            # the same launch through the driver's call, its parameters packed in place


class CudaBackend(Backend):
    name = "cuda"
    graphs = True
    streams = True
    cudnn = True
    cublas = True
    cuda_kernels = True
    kernel_language = "CUDA C"

    def __init__(self):
        import cupy
        self._cupy = cupy
        device = cupy.cuda.Device()
        self.compiler = CubinCompiler(int(device.compute_capability))
        self.kernels = KernelCache()
        self._launches: dict = {}
        self._capture_streams: dict = {}     # device id -> the stream graphs are captured on

    # -- arrays -------------------------------------------------------------------------------
    def empty(self, shape, dtype):
        try:
            return self._cupy.empty(shape, dtype)
        except Exception as e:
            if not is_out_of_memory(e):
                raise
            shape, dtype = (tuple(shape) if hasattr(shape, "__len__") else (shape,)), np.dtype(dtype)
            raise DeviceOutOfMemory(f"an array of shape {shape} {dtype.name}", math.prod(shape) * dtype.itemsize,
                                    e) from e

    def view(self, base, offset, shape, dtype, strides):
        """The array of `shape`, `dtype`, byte `strides` starting `offset` bytes into `base`."""
        return self._cupy.ndarray(shape, dtype, memptr=base.data + offset, strides=strides)

    def asarray(self, obj, dtype=None):
        """NumPy data is copied to the device; CuPy arrays, and objects exposing
        __cuda_array_interface__ or a CUDA __dlpack__ (a PyTorch CUDA tensor), are shared."""
        cp = self._cupy
        if isinstance(obj, cp.ndarray):
            array = obj
        elif isinstance(obj, np.ndarray):
            array = from_host(cp, obj)
        elif hasattr(obj, "__cuda_array_interface__"):
            array = cp.asarray(obj)
        elif hasattr(obj, "__dlpack__") and _dlpack_on_cuda(obj):
            array = cp.from_dlpack(obj)
        else:
            array = from_host(cp, np.asarray(obj))
        if dtype is not None and array.dtype != np.dtype(dtype):
            array = array.astype(dtype)       # a conversion is a new array, as np.asarray(x, dtype) makes
        return array

    def to_host(self, array):
        return array.get()

    def synchronize(self):
        self._cupy.cuda.get_current_stream().synchronize()

    def free_cached_memory(self):
        """Give the blocks CuPy's memory pool keeps free back to the device (after running out)."""
        self._cupy.get_default_memory_pool().free_all_blocks()

    def current_device(self) -> int:
        return self._cupy.cuda.runtime.getDevice()

    def memory_total(self) -> int:
        """The current device's memory in bytes (CUDA graphs' default budget is a share of it)."""
        return int(self._cupy.cuda.runtime.memGetInfo()[1])

    # -- graphs -------------------------------------------------------------------------------
    def capture(self, run):
        """Calls run() with a capturing stream as the current one and returns the CUDA graph of the work it
        enqueued (cupy.cuda.graph.Graph; graph.launch() enqueues that work on the current stream).
        Nothing executes during the capture. The stream is one of the backend's own: the legacy
        default stream cannot capture."""
        cp = self._cupy
        device = cp.cuda.runtime.getDevice()
        stream = self._capture_streams.get(device)
        if stream is None:
            stream = self._capture_streams[device] = cp.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            try:
                run()
            except BaseException:
                try:
                    stream.end_capture()
                except Exception:  # noqa: BLE001  (an invalidated capture ends with an error of its own)
                    pass
                raise
            return stream.end_capture()

    # -- kernels ------------------------------------------------------------------------------
    def kernel(self, program, layout) -> CudaKernel:
        return self.kernels.get_or_build((program, layout), lambda: self._build(program, layout))

    def _build(self, program, layout) -> CudaKernel:
        rendered = render_cuda(program, layout)
        cubin, path, cache, seconds = self.compiler.cubin(rendered)
        return CudaKernel(rendered, cubin, path, cache, seconds)

    def _function(self, kernel: CudaKernel, device_id: int):
        function = kernel.functions.get(device_id)
        if function is not None:
            return function
        cp = self._cupy
        with cp.cuda.Device(device_id):
            module = cp.cuda.function.Module()
            try:
                module.load(kernel.cubin)
            except cp.cuda.driver.CUDADriverError as e:
                if kernel.cache != "disk":
                    raise
                # A cache file whose checksum holds but which the driver will not load: drop it and
                # compile afresh (a real error fails again).
                report_damaged(kernel.path, f"the driver would not load it: {e}")
                kernel.cubin, kernel.path, kernel.cache, kernel.compile_seconds = self.compiler.cubin(kernel.rendered)
                module = cp.cuda.function.Module()
                module.load(kernel.cubin)
            function = kernel.functions[device_id] = module.get_function(kernel.name)
        return function

    def _prepare(self, key, program, geometry: LaunchGeometry, device_id: int) -> tuple:
        """-> (launch plan, how its kernel was obtained, compile seconds), and caches the plan."""
        known = self.kernels.get((program, geometry.layout))
        kernel = known or self.kernel(program, geometry.layout)
        function = self._function(kernel, device_id)
        index64 = geometry.layout.index64
        pointers = 1 + program.relu_mask + len(program.operand_dtypes())
        raw = RawLaunch(function.ptr, geometry.grid, geometry.block, pointers, program.scalar_dtypes,
                        scalar_converters(program), index64, geometry.runtime_args, self._cupy)
        launch = CudaLaunch(function, kernel, geometry, np.int64 if index64 else np.int32, raw)
        if len(self._launches) >= _MAX_LAUNCH_PLANS:
            self._launches.clear()
        self._launches[key] = launch
        if known is not None:
            return launch, "memory", 0.0
        return launch, kernel.cache, kernel.compile_seconds

    def _plan(self, program, out, inputs) -> tuple:
        """-> (launch plan, the device pointers of out and the inputs, how the kernel was obtained or
        None when the plan was cached). `out` must not be empty."""
        data = out.data
        ptr = data.ptr
        pointers = [ptr]
        if out._c_contiguous:
            n = out.size
            bits = ptr
            for a in inputs:
                if not a._c_contiguous or a.size != n:
                    break
                p = a.data.ptr
                bits |= p
                pointers.append(p)
            else:
                # Every operand is contiguous with the destination's shape (an input of the same size
                # that broadcasts to it differs at most by leading 1s): no shapes or strides to read.
                key = (program, n, not (bits & 15), data.device_id)
                launch = self._launches.get(key)
                if launch is None:
                    launch, *built = self._prepare(key, program, flat_geometry(program, n, pointers), data.device_id)
                    return launch, pointers, built
                return launch, pointers, None
            del pointers[1:]
        pointers += [a.data.ptr for a in inputs]
        key = (program, out.shape, out.strides, not (ptr & 15), data.device_id,
               *[(a.shape, a.strides, not (p & 15)) for a, p in zip(inputs, pointers[1:])])
        launch = self._launches.get(key)
        built = None
        if launch is None:
            device = data.device_id
            launch, *built = self._prepare(key, program, self._geometry(program, out, inputs, device), device)
        return launch, pointers, built

    def prepare(self, program, out, inputs, scalars) -> tuple:
        """-> (launch plan, the arguments of CuPy's Function call, how the kernel was obtained or None
        when the plan was cached): what a launch through CuPy's call takes. `out` must not be empty."""
        launch, _, built = self._plan(program, out, inputs)
        return launch, _cupy_arguments(launch, out, inputs, scalars), built

    def run_elementwise(self, program, out, inputs, scalars, mask=None):
        if out.size == 0:
            return
        launch, pointers, built = self._plan(program, out, inputs)
        if mask is not None:
            pointers.insert(1, mask.data.ptr)       # programs with a ReLU mask take it right after `out`
        if not launch.raw.run(pointers, scalars):
            # (on CuPy's current stream, asynchronously, as the raw launch)
            launch.function(launch.grid, launch.block, _cupy_arguments(launch, out, inputs, scalars, mask))
        if launch_log.listeners:
            self._record(launch, out.size, built)

    def run_flat(self, program, out, inputs, scalars):
        """run_elementwise for inputs the caller knows to be C-contiguous and of out's shape, as is
        out (lazytensor.assign.direct): no layout to read; the launch plan is found by program, size,
        16-byte alignment and device, as run_elementwise finds it. A plan not made yet, a profile
        (its records) or a launch the raw path refuses take run_elementwise."""
        data = out.data
        bits = ptr = data.ptr
        pointers = [ptr]
        for a in inputs:
            ptr = a.data.ptr
            bits |= ptr
            pointers.append(ptr)
        launch = self._launches.get((program, out.size, not (bits & 15), data.device_id))
        if launch is None or launch_log.listeners or not launch.raw.run(pointers, scalars):
            self.run_elementwise(program, out, inputs, scalars)

    def bind_elementwise(self, program, out, inputs, scalars, mask=None, memo=None):
        """-> a function that runs this assignment (run_elementwise's work) and, called again, only
        launches: a plan's step keeps its arrays and scalars for good, so its kernel parameters are
        packed once (RawLaunch.bound), and any thread may launch them. The first call records how the
        kernel was obtained, later ones 'memory'.
        memo: an object whose `value` keeps the launch plan for steps whose operands have the same
        shapes, strides, alignment and device (the copies of a step a plan recipe makes): the launch
        is looked up once for all."""
        if out.size == 0:
            return _nothing
        if memo is not None and memo.value is not None:
            launch, built = memo.value, None
            pointers = [out.data.ptr, *[a.data.ptr for a in inputs]]
        else:
            launch, pointers, built = self._plan(program, out, inputs)
            if memo is not None:
                memo.value = launch
        if mask is not None:
            pointers.insert(1, mask.data.ptr)       # programs with a ReLU mask take it right after `out`
        raw, n = launch.raw, out.size
        params = raw.bound(pointers, scalars)       # (the closure keeps out, inputs and mask: their memory)
        how = [built]

        def run():
            if not raw.launch(params):
                launch.function(launch.grid, launch.block, _cupy_arguments(launch, out, inputs, scalars, mask))
            if launch_log.listeners:
                self._record(launch, n, how.pop() if how else None)
            elif how:
                how.pop()
        return run

    def _geometry(self, program, out, inputs, device_id) -> LaunchGeometry:
        return plan_launch(program, out.shape, out.strides, out.data.ptr,
                           [(a.shape, a.strides, a.data.ptr) for a in inputs])

    @staticmethod
    def _record(launch: CudaLaunch, n: int, built) -> None:
        cache, seconds = built if built else ("memory", 0.0)
        launch_log.record(launch_log.KernelRecord(launch.kernel.name, "cuda", "elementwise", n, cache, seconds,
                                                  launch.config))

    def explain_elementwise(self, program, out, inputs) -> str:
        device = out.data.device_id
        geometry = self._geometry(program, out, inputs, device)
        kernel = self.kernel(program, geometry.layout)
        return (f"cuda kernel {kernel.name}: {describe_geometry(geometry)}; launched by the driver's cuLaunchKernel "
                f"over parameters packed in place\n{kernel.source}")

    # -- reductions (kernels/cuda/reduce.py) ----------------------------------------------------
    def run_reduction(self, program, spec, out, inputs, scalars, scratch=None):
        cuda_reduce.run_reduction(self, program, spec, out, inputs, scalars, scratch)

    def reduction_scratch(self, program, spec, out, inputs):
        return cuda_reduce.scratch_for(self, program, spec, out, inputs)

    def explain_reduction(self, program, spec, out, inputs) -> str:
        return cuda_reduce.explain_reduction(self, program, spec, out, inputs)


def _nothing():
    pass


def _cupy_arguments(launch: CudaLaunch, out, inputs, scalars, mask=None) -> list:
    """The arguments of CuPy's Function call for this launch (RawLaunch's refusals take that call)."""
    arrays = [out.data] if mask is None else [out.data, mask.data]      # (the mask right after `out`)
    return [*arrays, *[a.data for a in inputs], *launch.raw.converted(scalars), *launch.tail]


def from_host(cp, a: np.ndarray):
    """A device copy of host array `a`, bit for bit. cupy.asarray fills a 0-d array from its value
    (ndarray.fill), and fill writes any value equal to 0 with a memset: a float -0.0 arrived as
    +0.0. So a 0-d array travels as its one-element 1-d view, copied as bytes like any other."""
    if a.ndim == 0:
        return cp.asarray(a.reshape(1)).reshape(())
    return cp.asarray(a)


def describe_geometry(geometry: LaunchGeometry) -> str:
    """The launch configuration and indexing, in the words explain prints."""
    layout = geometry.layout
    parts = [geometry.config()]
    if layout.rows:
        parts.append(f"{layout.vector} elements per thread per step with 16-byte vector loads and stores, "
                     f"in per-channel rows: each thread keeps one chunk of {layout.vector} channels and reads "
                     f"the per-channel operands once, then steps over rows, {layout.rows} per iteration")
    elif layout.vector > 1:
        parts.append(f"{layout.vector} elements per thread per step with 16-byte vector loads and stores"
                     + (", scalar tail" if layout.has_tail() else ""))
    else:
        parts.append("scalar loads and stores" + (f" ({'; '.join(geometry.notes)})" if geometry.notes else ""))
    parts.append("64-bit indexing" if layout.index64 else "32-bit indexing")
    names = geometry.names or ["out"] + [f"in{k}" for k in range(len(layout.access) - 1)]
    access = ", ".join(f"{name} {'contiguous' if acc == CONTIGUOUS else 'element strides ' + str(st)}"
                       for name, acc, st in zip(names, layout.access, geometry.strides))
    parts.append(f"collapsed shape {geometry.extents}: {access}")
    return "; ".join(parts)


def _dlpack_on_cuda(obj) -> bool:
    try:
        return obj.__dlpack_device__()[0] in (2, 13)    # kDLCUDA, kDLCUDAManaged
    except Exception:
        return False
