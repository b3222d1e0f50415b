"""`python -m lazytensor bench --device cuda`: the cases of the CUDA backend's issue against their
peers (CuPy eager, cupy.fuse, torch.compile where torch is importable) and against the floor, all
measured in the same run.

Floor = bytes the expression must move / the bandwidth of a 16-byte-vector copy kernel measured
here. GPU times come from CUDA events around the call, after warm-up, as the median of many runs,
on data several times the 60 MB L2. Dispatch cost is host time per call on small arrays. First-use
costs run in fresh subprocesses with their own kernel cache folders.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

from lazytensor.kernels.timing import burst_ms

BIG = 1 << 28            # elements of the streaming cases: 1 GiB per float32 operand
CHANNELS = 64
SMALL = 1024
REPEAT = 15
DISPATCH_CALLS = 3000

_COPY = r'''
extern "C" __global__ void copy16_grid_stride(const uint4* src, uint4* dst, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
extern "C" __global__ void copy16_one_per_thread(const uint4* src, uint4* dst, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}'''


# The peers' expressions, as CuPy code (cupy.fuse names its kernel after the function).
def relu_affine_4(a, b, c, d):
    import cupy as cp
    return cp.maximum((a + b) * c + 5 * d, 0)


def relu_per_channel(x, m, s, g, b):
    import cupy as cp
    return cp.maximum((x - m) * s * g + b, 0)


def _gpu_ms(cp, fn, repeat=REPEAT, warmup=3, burst=10) -> float:
    """Median GPU milliseconds per call over bursts of back-to-back calls (kernels/timing.py)."""
    return burst_ms(fn, bursts=repeat, burst=burst, warmup=warmup)


def _host_us(cp, fn, calls=DISPATCH_CALLS) -> float:
    for _ in range(50):
        fn()
    cp.cuda.get_current_stream().synchronize()
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - started
    cp.cuda.get_current_stream().synchronize()
    return elapsed / calls * 1e6


def copy_bandwidth(cp) -> dict:
    """Bytes per second of read+write streams with 16-byte loads and stores, 2 GiB each way: a
    grid-stride loop over 32 blocks per SM (lazytensor's launch shape) and one vector per thread.
    The floor uses the faster of the two."""
    n = (2 << 30) // 16
    src = cp.empty(n * 4, cp.float32)
    dst = cp.empty_like(src)
    module = cp.RawModule(code=_COPY)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    shapes = {"copy16_grid_stride": sms * 32, "copy16_one_per_thread": -(-n // 256)}
    result = {}
    for name, grid in shapes.items():
        kernel = module.get_function(name)
        ms = _gpu_ms(cp, lambda: kernel((grid,), (256,), (src, dst, np.int64(n))))
        result[name] = 2 * n * 16 / (ms * 1e-3)
    return result


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _torch_compiled(torch, fn):
    try:
        return torch.compile(fn, dynamic=False)
    except Exception as exc:       # an inductor that cannot build here: the column says so
        return exc


def _peer_ms(cp, run, label, notes) -> float | None:
    try:
        return _gpu_ms(cp, run)
    except Exception as exc:       # noqa: BLE001 - a peer that fails is reported, not fatal
        notes.append(f"{label}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
        return None


def _streaming_case(cp, lt, torch, name, lt_fn, cupy_fn, torch_fn, arrays, out, bytes_moved, bw, notes):
    """One row: GPU milliseconds of each contender on the same device arrays."""
    tensors = [lt.asarray(a) for a in arrays]
    y = lt.asarray(out)
    expr_of = lt_fn

    def run_lt():
        y[...] = expr_of(*tensors)

    row = {"case": name, "lazytensor": _gpu_ms(cp, run_lt)}
    reference = out.copy()
    row["CuPy eager"] = _peer_ms(cp, lambda: cupy_fn(*arrays), "CuPy eager", notes)
    fused = cp.fuse(cupy_fn)
    row["cupy.fuse"] = _peer_ms(cp, lambda: fused(*arrays), "cupy.fuse", notes)
    check = fused(*arrays)
    tol = 1e-2 if out.dtype.itemsize == 2 else 1e-4      # cupy.fuse contracts into FMAs; float16 rounds per op here
    if not cp.allclose(check.astype(cp.float32), reference.astype(cp.float32), rtol=tol, atol=tol):
        notes.append(f"{name}: lazytensor's result differs from cupy.fuse's")
    row["torch.compile"] = None
    if torch is not None:
        compiled = _torch_compiled(torch, torch_fn)
        if isinstance(compiled, Exception):
            notes.append(f"torch.compile: {compiled}")
        else:
            views = [torch.from_dlpack(a) for a in arrays]
            row["torch.compile"] = _peer_ms(cp, lambda: compiled(*views), "torch.compile", notes)
    row["floor"] = bytes_moved / bw * 1e3
    return row


def _dispatch_case(cp, lt, torch, notes) -> dict:
    host = [np.random.default_rng(i).standard_normal(SMALL).astype(np.float32) for i in range(4)]
    arrays = [cp.asarray(h) for h in host]
    a, b, c, d = (lt.asarray(x) for x in arrays)
    y = lt.empty((SMALL,), np.float32, device="cuda")

    def assign_new_expression():
        y[...] = lt.relu((a + b) * c + 5 * d)

    expr = lt.relu((a + b) * c + 5 * d)

    def assign_built_expression():
        y[...] = expr

    fused = cp.fuse(relu_affine_4)
    out = cp.empty(SMALL, cp.float32)

    def eager():
        cp.maximum((arrays[0] + arrays[1]) * arrays[2] + 5 * arrays[3], 0, out=out)

    # CuPy's Function call of the very kernel and arguments lazytensor runs (the launch it used before the raw launch).
    from lazytensor.plan.lower import lower
    program, inputs, scalars = lower(expr, np.dtype(np.float32))
    launch, args, _ = y.backend.prepare(program, y.data, inputs, scalars)

    def bare():
        launch.function(launch.grid, launch.block, args)

    # The launch lazytensor makes (kernels/cuda/raw_launch.py): the parameters written, then the
    # driver's call; and the driver's call alone, over parameters already written.
    raw, pointers = launch.raw, [y.data.data.ptr, *[a.data.ptr for a in inputs]]
    raw.run(pointers, scalars)

    row = {"case": "4. dispatch, 1024 elements (host us per call)",
           "lazytensor": _host_us(cp, assign_new_expression),
           "lazytensor, expression built once": _host_us(cp, assign_built_expression),
           "bare launch of the same kernel (CuPy's call)": _host_us(cp, bare),
           "raw launch of the same kernel (parameters packed, cuLaunchKernel)": _host_us(cp, lambda: raw.run(pointers, scalars)),
           "cuLaunchKernel alone (parameters written before)": _host_us(cp, lambda: raw.launch(raw.params)),
           "CuPy eager": _host_us(cp, eager),
           "cupy.fuse": _host_us(cp, lambda: fused(*arrays))}
    if torch is not None:
        compiled = _torch_compiled(torch, lambda a, b, c, d: torch.relu((a + b) * c + 5 * d))
        if not isinstance(compiled, Exception):
            views = [torch.from_dlpack(x) for x in arrays]
            try:
                row["torch.compile"] = _host_us(cp, lambda: compiled(*views), calls=DISPATCH_CALLS // 3)
            except Exception as exc:  # noqa: BLE001
                notes.append(f"torch.compile dispatch: {exc}")
    return row


_FIRST_USE = textwrap.dedent('''
    import time, numpy as np
    import lazytensor as lt
    x = lt.asarray(np.linspace(-3, 3, 4096, dtype=np.float32), device="cuda")
    z = lt.asarray(np.linspace(1, 2, 4096, dtype=np.float32), device="cuda")
    y = lt.empty((4096,), np.float32, device="cuda")
    if {warm_nvrtc}:                              # another expression first: NVRTC loaded and used once
        y[...] = lt.exp(x * 0.5 + z) - z
    y.backend.synchronize()                       # CUDA context and arrays exist before timing
    started = time.perf_counter()
    y[...] = {expression}
    y.backend.synchronize()
    print(time.perf_counter() - started)
''')


def _first_use_seconds(cache_dir: str, expression: str, warm_nvrtc: bool = False) -> float:
    """Seconds to the first result of `expression` (over x, z), in a new process with this kernel cache."""
    env = dict(os.environ, LAZYTENSOR_CACHE_DIR=cache_dir, PYTHONUNBUFFERED="1")
    code = _FIRST_USE.format(expression=expression, warm_nvrtc=warm_nvrtc)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed")
    return float(done.stdout.split()[-1])


def _first_use_case() -> dict:
    # Each figure in a process of its own, so that nothing this benchmark ran before (cases 1-4,
    # torch.compile) weighs on it. Scalars are kernel arguments and operands are numbered as they
    # come, so a new expression is a new tree of operations: the second has the first's operations
    # in another arrangement, a kernel of about the same cost.
    first, same_ops = "lt.tanh(x * 1.5 - z) / (z + 2) + lt.sqrt(z)", "lt.sqrt(z) - lt.tanh(x * 1.5 + z) / (z + 2)"
    trig = "lt.expm1(lt.sin(x) * 0.25 + lt.cos(z)) * z"
    with tempfile.TemporaryDirectory() as cache:
        cold_process = _first_use_seconds(cache, first)            # new process: NVRTC's first compile
        warm_cache = _first_use_seconds(cache, first)              # new process, kernel on disk
        warm_nvrtc = _first_use_seconds(cache, same_ops, True)     # NVRTC already used, this kernel not
        warm_trig = _first_use_seconds(cache, trig, True)
    return {"new expression in a new process (NVRTC's first compile)": cold_process,
            "new expression, NVRTC already used in the process": warm_nvrtc,
            "new process, kernel in the disk cache": warm_cache,
            "new expression with sin, cos, expm1 (NVRTC already used)": warm_trig}


def _fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def run_cuda_bench(print_fn=print) -> list:
    """Run every case, print the table with `print_fn`, return the rows."""
    import cupy as cp
    import lazytensor as lt

    torch = _torch()
    notes = []
    dev = cp.cuda.Device()
    print_fn(f"device: {cp.cuda.runtime.getDeviceProperties(dev.id)['name'].decode()}, "
             f"{dev.attributes['MultiProcessorCount']} SMs; torch {'available' if torch else 'not available'}")
    copies = copy_bandwidth(cp)
    bw = max(copies.values())
    print_fn("streaming bandwidth, 16-byte vector copy of 2 GiB: " +
             ", ".join(f"{name} {v / 1e12:.3f} TB/s" for name, v in copies.items()) + "; the floor uses the faster")
    rows = []
    rng = cp.random.default_rng(0)

    # 1. relu((a+b)*c+5*d) on 2^28 float32.
    arrays = [rng.standard_normal(BIG, dtype=cp.float32) for _ in range(4)]
    out = cp.empty(BIG, cp.float32)
    rows.append(_streaming_case(
        cp, lt, torch, "1. relu((a+b)*c+5*d), 2^28 float32",
        lambda a, b, c, d: lt.relu((a + b) * c + 5 * d), relu_affine_4,
        (lambda a, b, c, d: torch.relu((a + b) * c + 5 * d)) if torch else None,
        arrays, out, 5 * BIG * 4, bw, notes))
    del arrays, out

    # 2. and 3. relu((x-m)*s*g+b) with per-channel vectors over (2^22, 64).
    for label, dtype in (("2. per-channel relu((x-m)*s*g+b), (2^22, 64) float32", cp.float32),
                         ("3. the same in float16 storage", cp.float16)):
        x = rng.standard_normal((BIG // CHANNELS, CHANNELS), dtype=cp.float32).astype(dtype)
        vecs = [rng.standard_normal(CHANNELS, dtype=cp.float32).astype(dtype) for _ in range(4)]
        out = cp.empty_like(x)
        itemsize = np.dtype(dtype).itemsize
        rows.append(_streaming_case(
            cp, lt, torch, label,
            lambda x, m, s, g, b: lt.relu((x - m) * s * g + b), relu_per_channel,
            (lambda x, m, s, g, b: torch.relu((x - m) * s * g + b)) if torch else None,
            [x, *vecs], out, 2 * BIG * itemsize, bw, notes))
        del x, vecs, out

    cp.get_default_memory_pool().free_all_blocks()
    header = ["case", "lazytensor", "CuPy eager", "cupy.fuse", "torch.compile", "floor", "lt/floor", "lt/torch.compile"]
    print_fn("")
    print_fn("GPU milliseconds (median of %d, CUDA events)" % REPEAT)
    print_fn(" | ".join(header))
    for r in rows:
        ratio_floor = r["lazytensor"] / r["floor"]
        ratio_torch = r["lazytensor"] / r["torch.compile"] if r["torch.compile"] else None
        print_fn(" | ".join([r["case"], _fmt(r["lazytensor"]), _fmt(r["CuPy eager"]), _fmt(r["cupy.fuse"]),
                             _fmt(r["torch.compile"]), _fmt(r["floor"]), _fmt(ratio_floor, 2) + "x",
                             (_fmt(ratio_torch, 2) + "x") if ratio_torch else "-"]))

    dispatch = _dispatch_case(cp, lt, torch, notes)
    rows.append(dispatch)
    print_fn("")
    print_fn(dispatch["case"])
    for k, v in dispatch.items():
        if k != "case":
            print_fn(f"  {k}: {v:.1f} us")

    try:
        first = _first_use_case()
        rows.append({"case": "5. first use (seconds)", **first})
        print_fn("")
        print_fn("5. first use (seconds, host wall time to a finished result)")
        for k, v in first.items():
            print_fn(f"  {k}: {v:.3f} s")
    except Exception as exc:  # noqa: BLE001
        notes.append(f"case 5: {exc}")
    for n in notes:
        print_fn(f"note: {n}")
    return rows
