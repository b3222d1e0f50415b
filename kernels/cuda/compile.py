"""CUDA C -> cubin with NVRTC (through CuPy's NVRTC binding), and the disk cache of cubins.

Why not cupy.RawModule: CuPy appends -ftz=true to every NVRTC compile it runs, which flushes float32
subnormals to zero where NumPy keeps them. So kernels are compiled here with render_cuda's options
and cached as cubin files under cache_dir()/cuda, keyed by source, options, architecture and NVRTC
version; a new process loads them without running NVRTC. CuPy still loads and launches them. Each
file is the cubin and its checksum (kernels/cache.py: a damaged file is reported, deleted and
compiled afresh), written under a temporary name and renamed into place.
"""
from __future__ import annotations

import hashlib
import time
from functools import lru_cache

from lazytensor.kernels.cache import cache_dir, cache_folder, read_sealed, write_sealed
from lazytensor.kernels.cuda.render_cuda import NVRTC_OPTIONS, CudaSource


# Part of every cubin's cache key: files of an older layout (no checksum) are never read as this one.
_FORMAT = "sealed-1"


def nvrtc_options(nvrtc_version: tuple) -> tuple:
    """render_cuda's NVRTC_OPTIONS, plus those that only make NVRTC faster where this version knows
    them: -minimal (NVRTC 12.4 and later) leaves texture, surface, device-runtime and driver-API
    declarations out of the front end, which no kernel here uses. It about halves the front end's
    time (a float32 kernel: 11.3 -> 8.2 ms of NVRTC on the H200 host) and generates the same PTX
    (tests/kernels/test_cuda_codegen.py checks). nvrtc_check compiles with the same set."""
    return (*NVRTC_OPTIONS, *(("-minimal",) if tuple(nvrtc_version) >= (12, 4) else ()))


@lru_cache(maxsize=1)
def cuda_include_dir() -> str | None:
    """The folder holding cuda_fp16.h (found as CuPy finds it), or None when none is installed."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        return None
    return find_nvidia_header_directory("cudart")


def _include_options(source: CudaSource) -> tuple:
    if not (source.float16 or source.bfloat16):
        return ()
    include = cuda_include_dir()
    if include is None:
        raise RuntimeError("this kernel uses float16 or bfloat16 and needs cuda_fp16.h or cuda_bf16.h, which was not "
                           "found: install the "
                           "nvidia-cuda-runtime wheel (pip install nvidia-cuda-runtime) or a CUDA toolkit "
                           "(set CUDA_PATH)")
    return (f"-I{include}",)


class CubinCompiler:
    """Compiles for one GPU architecture: the device's, or the newest NVRTC knows below it."""

    def __init__(self, compute_capability: int):
        from cupy_backends.cuda.libs import nvrtc
        self._nvrtc = nvrtc
        self.nvrtc_version = tuple(nvrtc.getVersion())
        supported = [int(a) for a in nvrtc.getSupportedArchs()]
        below = [a for a in supported if a <= compute_capability]
        if not below:
            raise RuntimeError(f"NVRTC {self.nvrtc_version} supports architectures {supported}, none of them at "
                               f"or below this GPU's compute capability {compute_capability}")
        self.arch = max(below)

    def cache_path(self, source: CudaSource) -> tuple:
        options = (*nvrtc_options(self.nvrtc_version), f"-arch=sm_{self.arch}", *_include_options(source))
        key = hashlib.sha1("\0".join([source.source, *options, repr(self.nvrtc_version), _FORMAT]).encode()).hexdigest()
        return cache_dir() / "cuda" / f"{source.name}.{key[:16]}.cubin", options

    def cubin(self, source: CudaSource) -> tuple:
        """-> (cubin bytes, path or None (no disk cache), "disk" or "compiled", seconds spent compiling).
        A damaged cache file is reported (one CacheWarning naming it), deleted and compiled afresh."""
        path, options = self.cache_path(source)
        if cache_folder("cuda") is None:
            path = None
        else:
            data = read_sealed(path)
            if data is not None:
                return data, path, "disk", 0.0
        started = time.perf_counter()
        data = self.compile(source, options)
        seconds = time.perf_counter() - started
        if path is not None and not write_sealed(path, data):
            path = None
        return data, path, "compiled", seconds

    def compile(self, source: CudaSource, options: tuple) -> bytes:
        nvrtc = self._nvrtc
        prog = nvrtc.createProgram(source.source, f"{source.name}.cu", (), ())
        try:
            try:
                nvrtc.compileProgram(prog, list(options))
            except nvrtc.NVRTCError as exc:
                log = nvrtc.getProgramLog(prog)
                numbered = "\n".join(f"{i + 1:4d}  {line}" for i, line in enumerate(source.source.splitlines()))
                raise RuntimeError(f"NVRTC could not compile {source.name} ({' '.join(options)}): {exc}\n"
                                   f"{log.strip()}\n{numbered}") from None
            return nvrtc.getCUBIN(prog)
        finally:
            nvrtc.destroyProgram(prog)
