"""Compile CUDA C to PTX with NVRTC through cuda-bindings, on a machine without a GPU: CI uses it
to prove that every kernel the CUDA backend would generate compiles.

cuda_fp16.h comes from the nvidia-cuda-runtime wheel (found with cuda-pathfinder, as CuPy finds it).
"""
from __future__ import annotations

from lazytensor.kernels.cuda.compile import cuda_include_dir, nvrtc_options


class NvrtcError(RuntimeError):
    pass


def _check(result, what: str):
    err, *rest = result
    if int(err) != 0:
        raise NvrtcError(f"NVRTC {what} failed: {err}")
    return rest[0] if len(rest) == 1 else rest


def nvrtc_version() -> tuple:
    """(major, minor) of the NVRTC that cuda-bindings loads."""
    from cuda.bindings import nvrtc

    return tuple(_check(nvrtc.nvrtcVersion(), "nvrtcVersion"))


def compile_to_ptx(source: str, arch: str = "compute_90", name: str = "kernel.cu", optimize: bool = True) -> str:
    """The PTX of `source` compiled with the backend's NVRTC options; raises NvrtcError with NVRTC's
    log (and the numbered source) when it does not compile. optimize=False adds -G (no device
    optimization): the source is checked just as fully and compiles about 15 times faster, which is
    what a test of hundreds of kernels wants."""
    from cuda.bindings import nvrtc

    options = [*nvrtc_options(nvrtc_version()), f"--gpu-architecture={arch}", *([] if optimize else ["-G"])]
    include = cuda_include_dir()
    if include:
        options.append(f"-I{include}")
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        opts = [o.encode() for o in options]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if int(err) != 0:
            size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            numbered = "\n".join(f"{i + 1:4d}  {line}" for i, line in enumerate(source.splitlines()))
            hint = "" if include else "\n(no CUDA headers found: install the nvidia-cuda-runtime wheel for cuda_fp16.h)"
            raise NvrtcError(f"NVRTC could not compile {name} ({' '.join(options)}):\n"
                             f"{log.decode(errors='replace').rstrip(chr(0)).strip()}{hint}\n{numbered}")
        size = _check(nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
        ptx = b" " * size
        nvrtc.nvrtcGetPTX(prog, ptx)
        return ptx.rstrip(b"\0").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
