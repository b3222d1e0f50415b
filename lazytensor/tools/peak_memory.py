"""The peak memory of a run, measured where it can be.

On CUDA: the high-water mark of the bytes lazytensor holds in CuPy's memory pool (every tensor, plan
arena and cuDNN workspace it allocates goes through that pool). While a PeakMemory is active, CuPy's
allocator is wrapped so that each allocation updates the mark: the pool's used bytes only grow at an
allocation. This is what torch.cuda.max_memory_allocated counts on PyTorch's side.
On the CPU: the process's peak resident set size (it includes Python, NumPy and the compiler, and it
never goes down, so it is an upper bound of the run's own peak).
"""
from __future__ import annotations


class PeakMemory:
    """`with PeakMemory(device) as peak: ...`, then `peak.bytes` (None where unknown) and
    `peak.describe()`."""

    def __init__(self, device: str):
        self.device = device
        self.bytes: int | None = None
        self._previous = None

    def __enter__(self):
        if self.device == "cuda":
            import cupy
            pool = cupy.get_default_memory_pool()
            self.bytes = pool.used_bytes()
            self._previous = cupy.cuda.get_allocator()

            def malloc(nbytes):
                memory = pool.malloc(nbytes)
                self.bytes = max(self.bytes, pool.used_bytes())
                return memory
            cupy.cuda.set_allocator(malloc)
        return self

    def __exit__(self, *exc):
        if self.device == "cuda":
            import cupy
            cupy.cuda.set_allocator(self._previous)
        else:
            self.bytes = _peak_rss()
        return False

    def describe(self) -> str:
        if self.bytes is None:
            return "not known on this platform"
        where = ("CuPy memory pool high-water mark" if self.device == "cuda"
                 else "peak resident set of the process")
        return f"{format_bytes(self.bytes)} ({where})"


def _peak_rss() -> int | None:
    try:
        import resource
    except ImportError:            # Windows
        return None
    import sys
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024      # bytes on macOS, KiB on Linux


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"
