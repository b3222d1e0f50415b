"""Fused scans on CUDA: a generated CUDA C kernel per (program, scan, rank, operand layout), compiled
by NVRTC like the elementwise kernels (backend.compiler, its cubin cache) and launched through CuPy.

Design: docs/design/cuda-kernels.md, section "kernels/cuda/scan.py".
"""
from __future__ import annotations

import hashlib

import numpy as np

from lazytensor.kernels import launch_log
from lazytensor.kernels.cuda.kernel import CudaKernel, scalar_arguments, scalar_converters
from lazytensor.kernels.cuda.prelude import prelude
from lazytensor.kernels.program import ElementwiseProgram, layout_of
from lazytensor.kernels.cuda.render_cuda import REGISTER, STORAGE, CudaSource, body_lines, convert, register_value, uses_float16, \
    scalar_parameters, uses_complex, uses_bfloat16
from lazytensor.kernels.ops import BFLOAT16
from lazytensor.kernels.scan import Scan

_F16 = np.dtype(np.float16)
BLOCK = 128


def render_cuda_scan(program: ElementwiseProgram, spec: Scan, input_shapes) -> CudaSource:
    nd = len(spec.shape)
    axis = spec.axis
    out_dtype = np.dtype(spec.out_dtype)
    masks = layout_of(spec.shape, input_shapes, False).masks
    in_dtypes = [np.dtype(d) for d in program.input_dtypes()]
    kept = [d for d in range(nd) if d != axis]
    params = [f"{STORAGE[out_dtype]}* __restrict__ out"]
    params += [f"const {STORAGE[dt]}* __restrict__ in{k}" for k, dt in enumerate(in_dtypes)]
    params += scalar_parameters(program)
    params += ["const long long rows"] + [f"const long long e{d}" for d in range(nd)]
    params += [f"const long long out_s{d}" for d in range(nd)]
    strided = []        # (operand k, dimension d) whose element stride is an argument: the varying ones
    for k, mask in enumerate(masks):
        off = nd - len(mask)
        strided += [(k, off + d) for d, varies in enumerate(mask) if varies]
    params += [f"const long long in{k}_s{d}" for k, d in strided]

    body = ["const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
            "if (t >= rows) return;",
            "long long rest = t;"]
    for d in reversed(kept):
        body.append(f"const long long i{d} = rest % e{d}; rest /= e{d};")
    names = ["out"] + [f"in{k}" for k in range(len(masks))]
    own = {"out": list(range(nd))}
    for k in range(len(masks)):
        own[f"in{k}"] = [d for kk, d in strided if kk == k]
    for name in names:
        terms = [f"i{d} * {name}_s{d}" for d in own[name] if d != axis]
        body.append(f"long long {name}_o = {' + '.join(terms) or '0'};")
    acc_t = REGISTER[out_dtype]
    body.append(f"{acc_t} acc = ({acc_t}){spec.identity};")
    body.append(f"for (long long j = 0; j < e{axis}; ++j) {{")
    inner = body_lines(program, lambda k: register_value(f"in{k}[in{k}_o]", in_dtypes[k]))
    result_dtype = np.dtype(program.instrs[program.result][1])
    inner.append(f"const {acc_t} x_ = {convert(f'v{program.result}', out_dtype, result_dtype)};")
    if out_dtype.kind in "iu" and out_dtype.itemsize >= 4:
        # signed overflow is undefined in C: wrap in the unsigned twin, as NumPy's integers wrap
        u = "unsigned long long" if out_dtype.itemsize == 8 else "unsigned int"
        inner.append(f"acc = ({acc_t})(({u})acc {spec.op} ({u})x_);")
    elif out_dtype.kind in "iu":
        inner.append(f"acc = {convert(f'(unsigned int)acc {spec.op} (unsigned int)x_', out_dtype)};")
    else:
        inner.append(f"acc = {convert(f'acc {spec.op} x_', out_dtype)};")
    stored = "__float2half_rn(acc)" if out_dtype == _F16 else "lt_f2bf(acc)" if out_dtype == BFLOAT16 else "acc"
    inner.append(f"out[out_o] = {stored};")
    inner += [f"{name}_o += {name}_s{axis};" for name in names if axis in own[name]]
    body += ["    " + line for line in inner] + ["}"]
    signature = ",\n        ".join(params)
    kernel = "\n".join([f'extern "C" __global__ void __launch_bounds__({BLOCK}) LT_SCAN(\n        {signature})',
                        "{", *["    " + line for line in body], "}", ""])
    float16 = uses_float16(program) or out_dtype == _F16
    bfloat16 = uses_bfloat16(program) or out_dtype == BFLOAT16
    head = prelude(float16, bfloat16, uses_complex(program))
    name = "lt_scan_" + hashlib.sha1((head + kernel).encode()).hexdigest()[:20]
    kernel = kernel.replace("LT_SCAN", name)
    return CudaSource(name, head + "\n" + kernel, float16, kernel, bfloat16)


# Fewer rows than this, each at least FALLBACK_LENGTH long: CuPy's parallel scan (module docstring).
FALLBACK_ROWS = 4096
FALLBACK_LENGTH = 1024


def library_fallback(spec: Scan) -> bool:
    """Whether this scan runs as an elementwise kernel and CuPy's scan instead of the one-thread-per-row
    kernel: too few rows to fill the GPU, each long enough for the sequential walk to dominate."""
    outer, n, inner = spec.split()
    return outer * inner < FALLBACK_ROWS and n >= FALLBACK_LENGTH


def _strides(a) -> list:
    return [s // a.itemsize for s in a.strides]


def _key(program, spec: Scan, inputs) -> tuple:
    masks = layout_of(spec.shape, [a.shape for a in inputs], False).masks
    return ("scan", program, spec.kind, spec.axis, len(spec.shape), spec.out_dtype, masks)


def scan_kernel(backend, program, spec: Scan, inputs) -> tuple:
    """-> (CudaKernel, (how it was obtained, compile seconds))."""
    built = []

    def build():
        rendered = render_cuda_scan(program, spec, [a.shape for a in inputs])
        cubin, path, cache, seconds = backend.compiler.cubin(rendered)
        built.append((cache, seconds))
        return CudaKernel(rendered, cubin, path, cache, seconds)

    kernel = backend.kernels.get_or_build(_key(program, spec, inputs), build)
    return kernel, (built[0] if built else ("memory", 0.0))


def run_scan(backend, program, spec: Scan, out, inputs, scalars) -> None:
    outer, n, inner = spec.split()
    rows = outer * inner
    if rows == 0 or n == 0:
        return
    if library_fallback(spec):
        import cupy
        values = backend.empty(spec.shape, spec.out_dtype)
        backend.run_elementwise(program, values, inputs, scalars)
        out[...] = getattr(cupy, spec.kind)(values, axis=spec.axis, dtype=spec.out_dtype)
        if launch_log.listeners:
            launch_log.record(launch_log.KernelRecord(f"cupy.{spec.kind}", "cuda", "scan", int(out.size), "memory",
                                                      0.0, f"CuPy's scan: {rows} rows of {n}"))
        return
    kernel, (cache, seconds) = scan_kernel(backend, program, spec, inputs)
    device = out.data.device_id
    function = backend._function(kernel, device)
    masks = layout_of(spec.shape, [a.shape for a in inputs], False).masks
    args = [out, *inputs]
    args += scalar_arguments(scalar_converters(program), scalars)
    args += [np.int64(rows)] + [np.int64(d) for d in spec.shape] + [np.int64(s) for s in _strides(out)]
    for a, mask in zip(inputs, masks):
        st = _strides(a)
        args += [np.int64(st[d]) for d, varies in enumerate(mask) if varies]
    function(((rows + BLOCK - 1) // BLOCK,), (BLOCK,), args)
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord(kernel.name, "cuda", "scan", int(out.size), cache, seconds,
                                                  f"{rows} rows of {n}, one thread per row"))


def explain_scan(backend, program, spec: Scan, out, inputs) -> str:
    outer, n, inner = spec.split()
    if library_fallback(spec):
        return (f"cupy.{spec.kind} over a temporary that one elementwise kernel fills with the expression: "
                f"{outer * inner} rows of {n} are too few rows for one thread per row (fewer than "
                f"{FALLBACK_ROWS}, each at least {FALLBACK_LENGTH} long); CuPy's parallel scan sums in another "
                f"order than NumPy (floats differ by rounding)")
    kernel, _ = scan_kernel(backend, program, spec, inputs)
    return (f"cuda scan kernel {kernel.name}: one thread per row ({outer * inner} rows of {n}), the axis in "
            f"order\n{kernel.source}")
