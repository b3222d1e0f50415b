"""The CPU backend: NumPy arrays, kernels generated as numba source and JIT-compiled.

Each kernel is a small module written to the disk cache folder and run from its text, so numba's
cache (next to the module, checked: kernels/cpu/numba_cache.py) serves later processes. A damaged cache
entry is reported once, deleted and rebuilt; a cache folder that cannot be used means kernels live in
memory only. A compile failure raises before anything is written to the destination.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

from lazytensor.kernels import launch_log
from lazytensor.kernels.backend import Backend
from lazytensor.kernels.background_compile import BackgroundCompiler, LocalJob, RemoteJob, wait_for_compiler
from lazytensor.kernels.cache import KernelCache, Unkept, cache_dir, cache_folder
from lazytensor.kernels.cpu.compile_jobs import compile_module
from lazytensor.kernels.cpu.kernel_module import INTP, compile_calls, kernel_name, module_for, numba_signature, on_disk
from lazytensor.kernels.tier import interpreter_forced, tier_marks
from lazytensor.kernels.cpu.numba_entry import compiled_entry
from lazytensor.kernels.cpu.interpret import run_program
from lazytensor.kernels.cpu.interpret_flat import FlatRunners
from lazytensor.kernels.cpu.interpret_reduce import run_reduction as interpret_reduction
from lazytensor.kernels.program import ElementwiseProgram, Layout, Reduction, layout_of
from lazytensor.kernels.cpu.render_numba import render_numba
from lazytensor.kernels.cpu.render_numba_reduce import CHUNKS, render_numba_reduce, state_types, strategy
from lazytensor.kernels.cpu import recorded_calls, segment_sums, stream_stores
from lazytensor.kernels.ops import BFLOAT16

# OpenMP's default wait policy spins idle threads, and on a busy machine (a notebook, a test run,
# two cores) every parallel launch then waits for descheduled spinners: 16 ms for any size, measured
# here, against 0.04 ms with passive waiting. Read by libgomp when numba first starts its pool.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Below this many elements the thread pool costs more than it saves: waking it costs 10-25 us, and
# the serial 5-op kernel runs 2^16 float32 elements in about 26 us (2 cores, OpenMP: at 2^16 the
# parallel kernel took 52 us at best, the serial 26.5; at 2^17 73 and 43, on a busy machine).
PARALLEL_MIN_ELEMENTS = 1 << 17

_FLAT = {nd: Layout(nd, True) for nd in range(33)}
_flat_runners = FlatRunners()
_F16 = np.dtype(np.float16)
_HALVES = frozenset((_F16, BFLOAT16))     # 16-bit floats: their arrays travel as uint16 bit patterns


class CpuKernel:
    __slots__ = ("name", "source", "module", "path", "f16", "n_inputs")

    def __init__(self, name, source, module, path, f16, n_inputs=None):
        self.name, self.source, self.module, self.path = name, source, module, path
        self.f16 = f16              # float16 and bfloat16 operands travel as uint16 bit patterns
        # where the further outputs start among the array arguments after `out`, for a module with
        # kernel_stream (else None)
        self.n_inputs = n_inputs if hasattr(module, "kernel_stream") else None


def _kernel_arg(a: np.ndarray):
    return a.view(np.uint16) if a.dtype in _HALVES else a


def layout_for_shape(shape: tuple, inputs) -> Layout:
    for a in inputs:
        if a.shape != shape or not a.flags.c_contiguous:
            return layout_of(shape, [a.shape for a in inputs], False)
    return _FLAT[len(shape)]


def layout_for(out: np.ndarray, inputs) -> Layout:
    shape = out.shape
    if out.flags.c_contiguous:
        for a in inputs:
            if a.shape != shape or not a.flags.c_contiguous:
                break
        else:
            return _FLAT[out.ndim]
    return layout_of(shape, [a.shape for a in inputs], False)


def compact_broadcasts(out: np.ndarray, inputs, layout: Layout):
    """Inputs broadcast by stride 0 (np.broadcast_to, a gradient of a sum: the seed broadcast to the
    summed shape) cut to size 1 along those axes, and the layout for them: the kernel then reads such
    an input as broadcast (in0[0], loaded once), where a strided array would keep LLVM from
    vectorizing the whole loop (the gradients of sum(tanh(a*b+c)*d) ran 3x slower)."""
    compacted = None
    for k, a in enumerate(inputs):
        if a.size > 1 and 0 in a.strides:
            cut = tuple(slice(0, 1) if s == 0 else slice(None) for s in a.strides)
            if compacted is None:
                compacted = list(inputs)
            compacted[k] = a[cut]
    if compacted is None:
        return inputs, layout
    return compacted, layout_of(out.shape, [a.shape for a in compacted], False)


class CpuBackend(Backend):
    name = "cpu"
    host_memory = True
    segmented_sums = True
    kernel_language = "numba"
    # bind_elementwise None: no launch to bind ahead (FusedElementwise.run asks on every run);
    # reduction_scratch None: reductions take their partial results' memory on every call

    def __init__(self):
        self.kernels = KernelCache()
        self.compiler = BackgroundCompiler(warm=("lazytensor.kernels.cpu.compile_jobs",))
        if not wait_for_compiler():
            self.compiler.start(_prepare_loading)
        # (program, id(spec)) -> _ReadyReduction: what a reduction over contiguous operands of the
        # spec's shape launches once its kernel is compiled, so that the next call of the same
        # program and spec object (the reduce node's own, interned by lazytensor.ops.reductions)
        # checks the layout and calls the kernel, without the key hashing and choices of the first.
        self._ready_reductions: dict = {}
        # [the cache it mirrors, {(program, rank): kernel}, {(program, rank): the serial kernel's
        # compiled entry (numba_entry), or False where it has none}, the interpreter's flat runners:
        # {(program, shape): (runner, the compile's open flag, tier_marks() when it was made, key)}]
        self._flat_kernels = [self.kernels, {}, {}, {}]

    # -- arrays -------------------------------------------------------------------------------
    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def view(self, base, offset, shape, dtype, strides):
        """The array of `shape`, `dtype`, byte `strides` starting `offset` bytes into `base`."""
        return np.ndarray(shape, dtype, buffer=base, offset=offset, strides=strides)

    def asarray(self, obj, dtype=None):
        return np.asarray(obj, dtype=dtype)

    def to_host(self, array):
        return np.asarray(array)

    def synchronize(self):
        pass

    # -- kernels ------------------------------------------------------------------------------
    def kernel(self, program: ElementwiseProgram, layout: Layout) -> CpuKernel:
        return self.kernels.get_or_build((program, layout), lambda: self._build(program, render_numba(program, layout)))

    def _build(self, program, source: str) -> CpuKernel:
        f16 = not _HALVES.isdisjoint(program.input_dtypes()) or any(dtype in _HALVES for _, dtype in program.stores())
        recording = recorded_calls.current()
        if recording is not None:          # (a stand-in, kept nowhere: see submit_recorded)
            recording.sources.append(source)
            return Unkept(CpuKernel(kernel_name(source), source, recording.module, None, f16, program.n_inputs))
        name, module, path = module_for(source)
        return CpuKernel(name, source, module, path, f16, program.n_inputs)

    def submit_recorded(self, key, job) -> None:
        """Compile in the background a kernel that job() compiles by running it once on scratch
        memory: the calls it would make are recorded here (no numba), compiled by a compile worker
        into the disk cache, and job() runs on the thread once they are there (numba's cache serves
        it). Where a recording has more than one kernel or no worker can be used, the thread runs job()."""
        if self.compiler.submitted(key) or interpreter_forced():    # (forced: nothing compiles)
            return
        recording = None
        if cache_folder("cpu") is not None:
            try:
                recording = recorded_calls.record(job)
            except Exception:  # noqa: BLE001  (the thread runs the job itself, and meets the error there)
                recording = None
        if recording is None or len(set(recording.sources)) != 1 or not recording.calls:
            self.compiler.submit(key, job)
            return
        source, calls = recording.sources[0], recording.calls
        if on_disk(source, [fn for fn, _ in calls]):
            self.compiler.submit(key, LocalJob(job, "loaded from the disk cache by a thread of this process"))
            return
        last = len(calls)
        done = []

        def load(name):
            done.append(name)
            if len(done) == last:
                job()
        self.compiler.submit(key, RemoteJob(compile_module, (source, calls, os.path.abspath(cache_dir())), load, job))

    def run_elementwise(self, program, out, inputs, scalars, mask=None):
        layout = layout_for(out, inputs)
        if layout.flat:
            # The flat layouts are interned (_FLAT): keyed by their rank, the lookup skips hashing
            # a Layout (a dataclass's hash, in Python). Kept per kernel cache, as _ready_reductions.
            flat = self._flat_kernels
            if flat[0] is not self.kernels:
                flat = self._flat_kernels = [self.kernels, {}, {}, {}]
            kernel = flat[1].get((program, layout.ndim))
            if kernel is None:
                kernel = self.kernels.get((program, layout))
                if kernel is not None:
                    flat[1][(program, layout.ndim)] = kernel
                elif mask is None and self._run_flat_interpreted(program, out, inputs, scalars):
                    return
        else:
            inputs, layout = compact_broadcasts(out, inputs, layout)
            kernel = self.kernels.get((program, layout))
        if kernel is not None:
            fn, args = _kernel_call(kernel, layout, out, inputs, scalars, mask)
            if fn.overloads and not launch_log.listeners:
                fn(*args)               # the hot path: a compiled kernel, nobody profiling
                return
        key = (program, layout, _signature(out, inputs, mask))
        if kernel is None or not fn.overloads:
            if not (wait_for_compiler() or self.compiler.failed(key)):
                self._interpret(program, layout, out, inputs, scalars, mask, key)
                return
            if kernel is None:
                kernel = self.kernel(program, layout)
                fn, args = _kernel_call(kernel, layout, out, inputs, scalars, mask)
        self._first_or_logged_call(kernel, fn, args, out.size)

    def run_flat(self, program, out, inputs, scalars):
        """run_elementwise for operands the caller knows to be C-contiguous and aligned with out's
        shape (flat layout; lazytensor.assign.direct), and scalars that are Const values: the compiled
        kernel is called without the layout tests, and on small arrays through its compiled entry
        (numba_entry). A kernel not compiled yet, float16 operands or a profile take run_elementwise.
        True where a flat runner's loops served the call (lazytensor.assign's C path may keep it)."""
        flat = self._flat_kernels
        kernel = entry = None
        if flat[0] is self.kernels:
            key = (program, out.ndim)
            small = out.size < PARALLEL_MIN_ELEMENTS
            if small:
                entry = flat[2].get(key)
                if entry and not launch_log.listeners:
                    entry[0](out, *inputs, *scalars)    # the serial kernel, without numba's dispatcher
                    return
            kernel = flat[1].get(key)
            if kernel is None:
                # _run_flat_interpreted's common case inline: a runner, its compile under way,
                # the tier's settings unchanged, nobody profiling.
                runner = flat[3].get((program, out.shape))
                if runner is not None and runner[1][0] and not launch_log.listeners and runner[2] == tier_marks():
                    if runner[0].run(out, inputs, scalars):
                        return bool(runner[0].loops)    # (served by NumPy's loops: loops_entry)
                elif self._run_flat_interpreted(program, out, inputs, scalars):
                    return
        if kernel is not None and not kernel.f16 and not launch_log.listeners and not _may_stream(kernel, out, inputs):
            module = kernel.module
            fn = module.kernel_seq if small else module.kernel_par
            if fn.overloads:
                args = (out, *inputs, *scalars)
                fn(*args)
                if small and entry is None:
                    # Kept where no call of this program and rank that is small can stream (the
                    # entry path skips _may_stream) and for the types this call passed, which the
                    # direct path's later calls pass too (numba_entry).
                    outputs = 1 if kernel.n_inputs is None else len(inputs) + 1 - kernel.n_inputs
                    never_streams = kernel.n_inputs is None or PARALLEL_MIN_ELEMENTS * 16 * outputs < stream_stores.MIN_BYTES
                    flat[2][key] = never_streams and compiled_entry(fn, args)
                return
        self.run_elementwise(program, out, list(inputs), list(scalars))

    def loops_entry(self, program, out):
        """Where a flat runner with NumPy's inner loops serves run_flat's calls of this program
        into arrays of out's shape: (the key of its compiled kernels in the flat lookups, the key
        of its runner), which lazytensor.assign's C path looks up on each call, as run_flat does;
        else None."""
        flat = self._flat_kernels
        entry = flat[3].get((program, out.shape))
        if entry is None or not entry[0].loops or flat[0] is not self.kernels:
            return None
        return (program, out.ndim), (program, out.shape)

    def _run_flat_interpreted(self, program, out, inputs, scalars) -> bool:
        """A later call of a program the interpreter tier served on flat operands of this shape,
        its kernel not arrived yet: its flat runner runs it (interpret_flat). False where none
        serves it (no runner, the kernel arrived or failed, the tier's settings changed: run_elementwise
        takes it). A profile records the call as run_elementwise's interpreted calls."""
        entry = self._flat_kernels[3].get((program, out.shape))
        if entry is None or not entry[1][0] or entry[2] != tier_marks():
            return False
        if not launch_log.listeners:
            return entry[0].run(out, inputs, scalars)
        started = time.perf_counter()
        if not entry[0].run(out, inputs, scalars):
            return False
        launch_log.record(launch_log.KernelRecord(
            "interpreter", "cpu", "elementwise", out.size, "none", 0.0,
            f"NumPy ufuncs, {time.perf_counter() - started:.6f} s; the kernel: {self.compiler.state(entry[3])}"))
        return True

    def _keep_flat_runner(self, program, layout, out, inputs, mask, key) -> None:
        """After an interpreted call: where later calls of its structure can take a flat runner,
        make one, kept while the key's compile is under way (or forever, the tier forced)."""
        if not layout.flat or mask is not None or len(inputs) != program.n_inputs or len(program.stores()) != 1 \
                or out.size == 0:
            return
        flat = self._flat_kernels
        if flat[0] is not self.kernels:
            return
        runners = flat[3]
        flag = [True] if interpreter_forced() else self.compiler.open_flag(key)
        if flag is not None and flag[0]:
            drops = _flat_runners.drops
            runner = _flat_runners.make(program, out.shape)
            if _flat_runners.drops != drops:       # (their buffers within FlatRunners' bounds)
                runners.clear()
            runners[(program, out.shape)] = (runner, flag, tier_marks(), key)

    def _interpret(self, program, layout, out, inputs, scalars, mask, key):
        """The interpreter tier runs this call; the kernel for its argument types compiles meanwhile."""
        started = time.perf_counter()
        try:
            run_program(program, out, inputs, scalars, mask)
        finally:    # a call the interpreter cannot serve still gets its kernel
            self._submit_compile(program, layout, key, out.size, scalars)
        self._keep_flat_runner(program, layout, out, inputs, mask, key)
        if launch_log.listeners:
            launch_log.record(launch_log.KernelRecord(
                "interpreter", "cpu", "elementwise", out.size, "none", 0.0,
                f"NumPy ufuncs, {time.perf_counter() - started:.6f} s; the kernel: {self.compiler.state(key)}"))

    def _submit_compile(self, program, layout, key, elements, scalars):
        """Hand the kernel's compile for this call's argument types to a compile worker, which
        compiles it into the disk cache; each variant is loaded from there as it comes. A kernel
        a process before left on disk is loaded by the thread here; where no worker can be used
        (no disk cache to hand it over, no process), the thread compiles."""
        if self.compiler.submitted(key) or interpreter_forced():    # (forced: nothing compiles)
            return
        calls = self._compile_calls(program, layout, key[2], elements, scalars)
        local = lambda: self._compile(program, layout, calls)        # noqa: E731
        if cache_folder("cpu") is None:
            self.compiler.submit(key, local)
            return
        source = render_numba(program, layout)
        if on_disk(source, [fn for fn, _ in calls]):
            self.compiler.submit(key, LocalJob(local, "loaded from the disk cache by a thread of this process"))
            return
        signatures = dict(calls)

        def load(name):
            kernel = self.kernel(program, layout)       # (its text is on disk: numba's cache serves it)
            getattr(kernel.module, name).compile(numba_signature(signatures[name]))
        # (the variant this call takes first; the others once the worker has no first variant to do)
        self.compiler.submit(key, RemoteJob(compile_module, (source, calls, os.path.abspath(cache_dir()), 1), load, local))

    @staticmethod
    def _compile_calls(program, layout, types, elements, scalars) -> list:
        """The kernel functions a call of these argument types takes, each with its arguments'
        descriptions (kernel_module.numba_signature): first the variant that call's size takes, then
        the other one, and the streaming one first where its outputs may exceed the cache."""
        signature = tuple(types) + tuple(scalars)
        first, second = ("kernel_par", "kernel_seq") if elements >= PARALLEL_MIN_ELEMENTS else ("kernel_seq", "kernel_par")
        calls = [(first, signature), (second, signature)]
        if _has_stream(program, layout) and elements * _output_bytes(program) >= stream_stores.MIN_BYTES:
            calls.insert(0, ("kernel_stream", signature + (INTP,)))
        return calls

    def _compile(self, program, layout, calls):
        """Build the kernel and compile it for `calls` (_compile_calls), here."""
        # (a damaged cache entry is reported and compiled afresh by numba's checked cache)
        compile_calls(self.kernel(program, layout).module, calls)

    def _first_or_logged_call(self, kernel, fn, args, elements):
        started = time.perf_counter()
        n_compiled = len(fn.overloads)
        hits = sum(fn.stats.cache_hits.values())
        fn(*args)                   # compiles, or loads numba's disk cache, before the body runs
        if launch_log.listeners:
            compiled = len(fn.overloads) > n_compiled
            cache = "memory"
            if compiled:
                cache = "disk" if sum(fn.stats.cache_hits.values()) > hits else "compiled"
            launch_log.record(launch_log.KernelRecord(
                kernel.name, "cpu", "elementwise", elements, cache,
                time.perf_counter() - started if compiled else 0.0,
                _VARIANTS.get(fn.py_func.__name__, "serial")))

    # -- reductions -----------------------------------------------------------------------------
    @staticmethod
    def _reduction_key(program, spec, layout) -> tuple:
        return ("reduce", program, spec.kind, spec.axes, len(spec.in_shape), spec.acc_dtype, spec.out_dtype,
                spec.ddof, spec.root, layout)

    def reduction_kernel(self, program, spec, layout) -> CpuKernel:
        return self.kernels.get_or_build(self._reduction_key(program, spec, layout),
                                         lambda: self._build(program, render_numba_reduce(program, spec, layout)))

    def _interpret_reduction(self, program, spec, out, inputs, scalars, key, small):
        """The interpreter tier runs this reduction (in the kernel's order: its chunks); its kernel
        compiles meanwhile, by running once on the same operands into scratch memory (numba compiles
        for the argument types it is called with)."""
        started = time.perf_counter()
        nchunks = _chunks(spec.in_shape[spec.axes[0]], small) if spec.axes else 1
        try:
            interpret_reduction(program, spec, out, inputs, scalars, nchunks)
        finally:    # a call the interpreter cannot serve still gets its kernel
            scratch = np.empty(out.shape, out.dtype)
            self.submit_recorded(key, lambda: self.run_reduction(program, spec, scratch, inputs, scalars, compile=True))
        if launch_log.listeners:
            launch_log.record(launch_log.KernelRecord(
                "interpreter", "cpu", "reduction", int(np.prod(spec.in_shape)), "none", 0.0,
                f"NumPy ufuncs, {time.perf_counter() - started:.6f} s; the kernel: {self.compiler.state(key)}"))

    def run_reduction(self, program, spec, out, inputs, scalars, compile=False):
        """compile=True: run the kernel, compiling it first if need be (never the interpreter)."""
        ready = self._ready_reductions.get((program, id(spec)))
        if ready is not None and ready.spec is spec and ready.cache is self.kernels and not launch_log.listeners:
            if ready.run(out, inputs, scalars):
                return
        shape = spec.in_shape
        original_spec = spec
        layout = layout_for_shape(shape, inputs)
        if layout.flat and len(shape) > 1 and len(spec.axes) == len(shape):
            # Everything reduced over contiguous operands: one flat axis (C order, as ravel).
            n = spec.count
            spec = Reduction(spec.kind, (0,), (n,), spec.acc_dtype, spec.out_dtype, spec.ddof, spec.root)
            inputs = [a.reshape(n) for a in inputs]
            shape, layout = (n,), _FLAT[1]
        small = math.prod(shape) < PARALLEL_MIN_ELEMENTS
        kernel = self.kernels.get(self._reduction_key(program, spec, layout))
        ready = kernel is not None and (kernel.module.reduce_main_seq if small else kernel.module.reduce_main).overloads
        if not (ready or compile or wait_for_compiler()):
            key = ("reduce", program, spec, layout, small, _signature(out, inputs, None))
            if not self.compiler.failed(key):
                self._interpret_reduction(program, spec, out, inputs, scalars, key, small)
                return
        kernel = self.reduction_kernel(program, spec, layout)
        target = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        args = [_kernel_arg(a) for a in inputs] + list(scalars) + list(shape) + [float(spec.count)]
        started = time.perf_counter()
        module = kernel.module
        main = module.reduce_main_seq if small else module.reduce_main
        fresh = not main.overloads
        if strategy(spec) == "rows":
            main(_kernel_arg(target), *args)
        else:
            nchunks = _chunks(shape[spec.axes[0]], small)
            nk = target.size // 2 if spec.kind == "meanvar" else target.size
            parts = [np.empty((nchunks, nk), dt) for dt in state_types(spec)]
            main(*parts, nchunks, *args)
            finish = module.reduce_finish_seq if small else module.reduce_finish
            finish(_kernel_arg(target), *parts, nchunks, float(spec.count))
        if target is not out:
            out[...] = target
        if launch_log.listeners:
            launch_log.record(launch_log.KernelRecord(
                kernel.name, "cpu", "reduction", int(np.prod(shape)), "compiled" if fresh else "memory",
                time.perf_counter() - started if fresh else 0.0, strategy(spec)))
        if layout.flat and main.overloads and not compile:
            flat_spec = spec
            spec = original_spec
            if len(self._ready_reductions) > 4096:
                self._ready_reductions.clear()
            self._ready_reductions[(program, id(spec))] = _ReadyReduction(
                self.kernels, spec, flat_spec, kernel, small, strategy(flat_spec) == "rows", state_types(flat_spec))

    def run_flat_reduction(self, program, spec, out, inputs, scalars):
        """run_reduction for a C-contiguous `out` and inputs the caller knows to be C-contiguous of
        the spec's input shape (lazytensor.assign.host_scalar): a kept launch runs without the layout
        tests."""
        ready = self._ready_reductions.get((program, id(spec)))
        if ready is not None and ready.spec is spec and ready.cache is self.kernels and not launch_log.listeners:
            ready.launch(out, inputs, scalars)
        else:
            self.run_reduction(program, spec, out, inputs, scalars)

    def flat_reduction_value(self, program, spec, inputs, scalars):
        """The value of a full reduction over operands as run_flat_reduction takes them, as a Python
        scalar, from a kept launch's one-call value function; None where there is none (yet): the
        caller then runs run_flat_reduction into a 0-d array."""
        ready = self._ready_reductions.get((program, id(spec)))
        if ready is None or ready.spec is not spec or ready.cache is not self.kernels or launch_log.listeners:
            return None
        entry = ready.value_entry
        if entry and not ready.flatten:
            return entry[0](*inputs, *scalars, *ready.tail)     # (ready.value's common case, inline)
        return ready.value(inputs, scalars, self.compiler)

    # -- segmented sums (lazytensor.ops.segments) ---------------------------------------------
    def run_segment_sums(self, program, segments, out, inputs, scalars, acc_dtype):
        segment_sums.run_segment_sums(self, program, segments, out, inputs, scalars, acc_dtype, PARALLEL_MIN_ELEMENTS)

    def explain_segment_sums(self, program, segments, out, inputs, acc_dtype) -> str:
        return segment_sums.explain_segment_sums(self, program, segments, out, inputs, acc_dtype)

    def explain_reduction(self, program, spec, out, inputs) -> str:
        layout = layout_for_shape(spec.in_shape, inputs)
        kernel = self.reduction_kernel(program, spec, layout)
        return f"cpu reduction kernel {kernel.name}: loop shape '{strategy(spec)}'\n{kernel.source}"

    def explain_elementwise(self, program, out, inputs) -> str:
        layout = layout_for(out, inputs)
        if not layout.flat:
            inputs, layout = compact_broadcasts(out, inputs, layout)
        source = render_numba(program, layout)
        large = out.size >= PARALLEL_MIN_ELEMENTS
        variant = "kernel_par (numba parallel, prange)" if large else "kernel_seq (numba serial)"
        kernel = self.kernels.get((program, layout))
        fn = None if kernel is None else (kernel.module.kernel_par if large else kernel.module.kernel_seq)
        if "def kernel_stream(" in source:
            head, why_not = stream_stores.stream_head([out] + list(inputs[program.n_inputs:]))
            if head is None:
                variant += f"; ordinary stores: {why_not}"
            else:
                variant = (f"kernel_stream (numba parallel, streaming stores from element {head} on: the "
                           f"results exceed the last-level cache, no write-allocate reads)")
                fn = None if kernel is None else kernel.module.kernel_stream
        state = self.compiler.state((program, layout, _signature(out, inputs, None)))
        if fn is not None and fn.overloads:
            tier = "tier: the compiled kernel" + (f" ({state})" if state else "")
        elif interpreter_forced():
            tier = "tier: the interpreter (NumPy ufuncs; LAZYTENSOR_TIER=interpreter: no kernel compiles)"
        elif wait_for_compiler():
            tier = "tier: the compiled kernel (LAZYTENSOR_JIT_WAIT=1: the first call waits for numba)"
        elif state is not None and self.compiler.lost((program, layout, _signature(out, inputs, None))):
            tier = f"tier: the interpreter (NumPy ufuncs): {state}"
        else:
            where = state or self.compiler.where_next()
            tier = f"tier: the interpreter (NumPy ufuncs) until the compiled kernel arrives ({where})"
        return (f"cpu kernel {kernel_name(source)}: {variant}, {'flat' if layout.flat else 'strided/broadcast'} "
                f"indexing\n{tier}\n{source}")


class _ReadyReduction:
    """A compiled reduction's launch over operands that are contiguous with the spec's input shape
    (flattened to one axis when every axis is reduced, as run_reduction does). The entry holds the
    spec it was made for: its id in the key is never reused while the entry lives; and the kernel
    cache it came from: a backend given a new cache (tests do) starts without them."""
    __slots__ = ("cache", "spec", "shape", "dims", "count", "main", "finish", "rows", "nchunks", "parts", "flatten",
                 "f16", "entries", "tail", "part", "value_fn", "value_entry", "name")

    def __init__(self, cache, spec, flat_spec, kernel, small, rows, state_dtypes):
        module = kernel.module
        self.f16 = kernel.f16 or spec.out_dtype in _HALVES    # 16-bit float arrays travel as uint16 bit patterns
        self.cache = cache
        self.spec = spec
        self.shape = spec.in_shape
        self.flatten = flat_spec is not spec
        self.dims = flat_spec.in_shape
        self.count = float(flat_spec.count)
        self.main = module.reduce_main_seq if small else module.reduce_main
        # (the serial kernels' compiled entries (numba_entry)..., the rank of `out`), found by the
        # first launch: its operands' types are those of every later one (contiguous, aligned, of
        # the spec's dtypes and rank; the scalars Const values), and out's dtype is the spec's
        self.entries = None if small else False
        self.rows = rows
        if rows:
            self.finish = None
            self.nchunks = self.parts = None
        else:
            self.finish = module.reduce_finish_seq if small else module.reduce_finish
            shape = flat_spec.in_shape
            self.nchunks = _chunks(shape[flat_spec.axes[0]], small)
            nk = math.prod(flat_spec.out_shape)     # (meanvar's out is (2,) + out_shape)
            self.parts = tuple(((self.nchunks, nk), dt) for dt in state_dtypes)
        # the arguments after the operands and scalars: the dims and the count (a float)
        self.tail = (*self.dims, self.count)
        # the one partial-state array of most kinds (sum, max, ...), as np.empty's arguments
        self.part = self.parts[0] if not rows and len(self.parts) == 1 else None
        # a full reduction's value in one call (render_numba_reduce's reduce_value_seq), and its
        # compiled entry once found (False: none)
        self.name = kernel.name
        self.value_fn = getattr(module, "reduce_value_seq", None) if small and not rows and not self.f16 else None
        self.value_entry = None if self.value_fn is not None else False

    def run(self, out, inputs, scalars) -> bool:
        """Launch into `out`; False (nothing done) when an operand or `out` is not laid out as
        the entry assumes: the caller then takes the general path."""
        shape = self.shape
        flags = out.flags
        if not (flags.c_contiguous and flags.aligned):
            return False
        for a in inputs:
            if a.shape != shape:
                return False
            flags = a.flags
            if not (flags.c_contiguous and flags.aligned):
                return False
        self.launch(out, inputs, scalars)
        return True

    def launch(self, out, inputs, scalars) -> None:
        """Launch into `out`, which the caller knows to be laid out as run() checks."""
        tail = self.tail
        if self.flatten:
            inputs = [a.reshape(self.dims) for a in inputs]
        if self.f16:
            inputs = [_kernel_arg(a) for a in inputs]
            out = _kernel_arg(out)
        entries = self.entries
        if entries and out.ndim != entries[-1]:
            entries = False         # (an `out` of another rank than the first launch's: the dispatcher)
        if self.rows:
            if entries:
                entries[0][0](out, *inputs, *scalars, *tail)
                return
            args = (out, *inputs, *scalars, *tail)
            self.main(*args)
            if entries is None:
                main = compiled_entry(self.main, args)
                self.entries = (main, out.ndim) if main else False
        else:
            part = self.part
            parts = (np.empty(*part),) if part is not None else [np.empty(s, dt) for s, dt in self.parts]
            if entries:
                entries[0][0](*parts, self.nchunks, *inputs, *scalars, *tail)
                entries[1][0](out, *parts, self.nchunks, self.count)
                return
            main_args = (*parts, self.nchunks, *inputs, *scalars, *tail)
            finish_args = (out, *parts, self.nchunks, self.count)
            self.main(*main_args)
            self.finish(*finish_args)
            if entries is None:
                main, finish = compiled_entry(self.main, main_args), compiled_entry(self.finish, finish_args)
                self.entries = (main, finish, out.ndim) if main and finish else False


    def value(self, inputs, scalars, compiler):
        """What launch() would write into a 0-d `out` of the spec's dtype, as a Python scalar (the
        same kernels, called by reduce_value_seq in one call); None where the module has no such
        function, or it is not compiled yet: then it compiles in the background (unless the
        compiler is waited for) and the caller launches."""
        entry = self.value_entry
        if entry is False:
            return None
        if self.flatten:
            inputs = [a.reshape(self.dims) for a in inputs]
        if entry:
            return entry[0](*inputs, *scalars, *self.tail)
        fn = self.value_fn
        args = (*inputs, *scalars, *self.tail)
        if not fn.overloads and not wait_for_compiler():
            compiler.submit((self.name, "reduce_value_seq"), lambda: fn(*args))
            return None
        value = fn(*args)
        self.value_entry = compiled_entry(fn, args)
        return value


def _chunks(extent: int, small: bool) -> int:
    """How many chunks a "chunks" reduction cuts its first reduced axis (of `extent`) into: CHUNKS
    for the parallel kernel, one for the serial kernel of small arrays, where each chunk's set-up
    (its partial state, a partial sum's lanes) would cost more than its elements (64 chunks made
    a sum of 1k elements 2.5x slower). Either way a fixed number, so that a shape always sums in
    the same order, whatever the thread count."""
    return 1 if small else max(1, min(CHUNKS, extent))


def _kernel_call(kernel, layout, out, inputs, scalars, mask):
    """The kernel function this call takes (by size) and its arguments."""
    module = kernel.module
    fn = module.kernel_par if out.size >= PARALLEL_MIN_ELEMENTS else module.kernel_seq
    if mask is not None and not layout.flat and out.ndim and (out.size // out.shape[0]) % 8:
        fn = module.kernel_seq      # mask bytes would straddle the parallel slices (render_numba)
    if kernel.f16:
        args = [_kernel_arg(out), *[_kernel_arg(a) for a in inputs], *scalars]
    else:
        args = [out, *inputs, *scalars]
    if mask is not None:
        args.insert(1, mask)
    elif _may_stream(kernel, out, inputs):
        stream = module.kernel_stream
        if stream.overloads or wait_for_compiler():      # (compiled in the background by _compile)
            head = stream_stores.stream_head([out] + list(inputs[kernel.n_inputs:]))[0]
            if head is not None:
                fn = stream
                args.append(head)
    return fn, args


def _may_stream(kernel, out, inputs) -> bool:
    """Whether a call might take kernel_stream: its module has one and its outputs (at most 16 bytes
    an element) could exceed stream_stores.MIN_BYTES. Most calls stop here, before stream_head."""
    return kernel.n_inputs is not None and out.size * 16 * (len(inputs) + 1 - kernel.n_inputs) >= stream_stores.MIN_BYTES


_VARIANTS = {"kernel_par": "parallel", "kernel_stream": "parallel, streaming stores"}


def _output_bytes(program) -> int:
    """Bytes one element of every output takes."""
    return sum(np.dtype(dtype).itemsize for _, dtype in program.stores())


def _prepare_loading() -> None:
    """Import what loading a compiled kernel from the disk cache needs (numba, the modules every
    kernel imports) and set up numba's typing and target registries (0.6 s that the first load
    from the cache takes otherwise), while the first kernel compiles in the worker."""
    from lazytensor.kernels.cpu import numba_cache, numba_prelude, numba_stream  # noqa: F401
    from lazytensor.kernels.cpu.numba_import import set_up_registries
    set_up_registries()


def _has_stream(program, layout) -> bool:
    """Whether the program's module has kernel_stream (render_numba's rule)."""
    return not program.relu_mask and layout.ndim >= 1 and (layout.flat or layout.ndim == 1)


def _array_type(a: np.ndarray) -> tuple:
    """What numba's type of an array argument depends on (numba's typeof reads the same flags)."""
    flags = a.flags
    layout = "C" if flags.c_contiguous else ("F" if flags.f_contiguous else "A")
    return (a.dtype, a.ndim, layout, not flags.writeable, flags.aligned)


def _signature(out, inputs, mask) -> tuple:
    """The array arguments' types in kernel order, float16 arrays as the uint16 they travel as."""
    arrays = [out] + ([mask] if mask is not None else []) + list(inputs)
    return tuple(_array_type(_kernel_arg(a)) for a in arrays)


