"""`out[idx] = values` on CUDA, the values computed by a fused ElementwiseProgram over the value shape
V = (len(idx),) + out.shape[1:]: a generated CUDA C kernel (compiled by NVRTC like the elementwise
kernels, launched through CuPy), one thread per element of V in a grid-stride loop. Where idx repeats
a row, which write wins is undefined, as in CuPy (NumPy's last-wins order would serialize the rows).
A negative entry counts from the end; entries are checked against the bounds before the launch
(lazytensor.ops.index_write). Shapes and element strides are kernel arguments."""
from __future__ import annotations

import hashlib

import numpy as np

from lazytensor.kernels import launch_log
from lazytensor.kernels.cuda.kernel import CudaKernel, scalar_arguments, scalar_converters
from lazytensor.kernels.cuda.prelude import prelude
from lazytensor.kernels.program import ElementwiseProgram, layout_of
from lazytensor.kernels.cuda.render_cuda import STORAGE, CudaSource, _stored, body_lines, register_value, uses_float16, \
    scalar_parameters, uses_bfloat16, uses_complex

BLOCK = 256


def render_cuda_index_write(program: ElementwiseProgram, value_shape: tuple, input_shapes, from_out=()) -> CudaSource:
    """from_out: inputs that are the destination's own rows (`y[idx] += e`, no repeated entry): read
    as out[out_o] just before the store there."""
    nd = len(value_shape)
    masks = layout_of(value_shape, input_shapes, False).masks
    in_dtypes = [np.dtype(d) for d in program.input_dtypes()]
    params = [f"{STORAGE[np.dtype(program.out_dtype)]}* __restrict__ out", "const long long* __restrict__ index"]
    params += [f"const {STORAGE[dt]}* __restrict__ in{k}" for k, dt in enumerate(in_dtypes)]
    params += scalar_parameters(program)
    params += ["const long long n", "const long long rows"] + [f"const long long e{d}" for d in range(nd)]
    params += [f"const long long out_s{d}" for d in range(nd)]
    strided = []
    for k, mask in enumerate(masks):
        off = nd - len(mask)
        strided += [(k, off + d) for d, varies in enumerate(mask) if varies]
    params += [f"const long long in{k}_s{d}" for k, d in strided]
    body = ["for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n;",
            "     t += (long long)gridDim.x * blockDim.x) {",
            "    long long rest = t;"]
    for d in range(nd - 1, 0, -1):
        body.append(f"    const long long i{d} = rest % e{d}; rest /= e{d};")
    body += ["    const long long i0 = rest;", "    long long r_ = index[i0];", "    if (r_ < 0) r_ += rows;"]
    for k in range(len(masks)):
        terms = [f"i{d} * in{k}_s{d}" for kk, d in strided if kk == k]
        body.append(f"    const long long in{k}_o = {' + '.join(terms) or '0'};")
    body.append("    const long long out_o = " + " + ".join(["r_ * out_s0"] + [f"i{d} * out_s{d}" for d in range(1, nd)]) + ";")
    body += ["    " + line for line in body_lines(program, lambda k: register_value(
        "out[out_o]" if k in from_out else f"in{k}[in{k}_o]", in_dtypes[k]))]
    body += [f"    out[out_o] = {_stored(program)};", "}"]
    signature = ",\n        ".join(params)
    kernel = "\n".join([f'extern "C" __global__ void __launch_bounds__({BLOCK}) LT_SCATTER(\n        {signature})',
                        "{", *["    " + line for line in body], "}", ""])
    float16, bfloat16 = uses_float16(program), uses_bfloat16(program)
    head = prelude(float16, bfloat16, uses_complex(program))
    name = "lt_scatter_" + hashlib.sha1((head + kernel).encode()).hexdigest()[:20]
    kernel = kernel.replace("LT_SCATTER", name)
    return CudaSource(name, head + "\n" + kernel, float16, kernel, bfloat16)


def _key(program, value_shape, inputs, from_out) -> tuple:
    return ("index_write", program, len(value_shape), layout_of(value_shape, [a.shape for a in inputs], False).masks,
            from_out)


def index_write_kernel(backend, program, value_shape, inputs, from_out=()) -> tuple:
    built = []

    def build():
        rendered = render_cuda_index_write(program, value_shape, [a.shape for a in inputs], from_out)
        cubin, path, cache, seconds = backend.compiler.cubin(rendered)
        built.append((cache, seconds))
        return CudaKernel(rendered, cubin, path, cache, seconds)

    kernel = backend.kernels.get_or_build(_key(program, value_shape, inputs, from_out), build)
    return kernel, (built[0] if built else ("memory", 0.0))


def run_index_write(backend, program, out, index, inputs, scalars, value_shape, from_out=()) -> None:
    n = int(np.prod(value_shape))
    if n == 0:
        return
    kernel, (cache, seconds) = index_write_kernel(backend, program, value_shape, inputs, from_out)
    function = backend._function(kernel, out.data.device_id)
    masks = layout_of(value_shape, [a.shape for a in inputs], False).masks
    args = [out, index, *inputs]
    args += scalar_arguments(scalar_converters(program), scalars)
    args += [np.int64(n), np.int64(out.shape[0])] + [np.int64(d) for d in value_shape]
    args += [np.int64(s // out.itemsize) for s in out.strides]
    for a, mask in zip(inputs, masks):
        st = [s // a.itemsize for s in a.strides]
        args += [np.int64(st[d]) for d, varies in enumerate(mask) if varies]
    grid = min((n + BLOCK - 1) // BLOCK, 65535 * 8)
    function((grid,), (BLOCK,), args)
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord(kernel.name, "cuda", "scatter", n, cache, seconds,
                                                  "one thread per value element"))


def explain_index_write(backend, program, out, index, inputs, value_shape, from_out=()) -> str:
    kernel, _ = index_write_kernel(backend, program, value_shape, inputs, from_out)
    return (f"cuda scatter kernel {kernel.name}: one thread per value element; a repeated row's winner is "
            f"undefined (as CuPy)\n{kernel.source}")
