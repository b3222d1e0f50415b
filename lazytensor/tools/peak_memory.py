"""The peak memory of a run, measured where it can be.

Design: docs/design/training-step.md, section "lazytensor/tools/peak_memory.py".
"""
from __future__ import annotations

import weakref

import numpy as np


class PeakMemory:
    """`with PeakMemory(device) as peak: ...`, then `peak.bytes` (None where unknown) and
    `peak.describe()`."""

    def __init__(self, device: str):
        self.device = device
        self.bytes: int | None = None
        self.resident: int | None = None     # on the CPU: the process's peak resident set
        self._previous = None
        self._live = 0
        self._owners: set = set()   # on the CPU: id() of the allocations counted and not yet freed

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
        else:
            from lazytensor.kernels.backend import backend_for
            backend = self._backend = backend_for(self.device)
            self.bytes = 0
            self._previous = {name: vars(backend).get(name) for name in ("empty", "asarray")}
            empty, asarray = backend.empty, backend.asarray
            backend.empty = lambda shape, dtype: self._counted(empty(shape, dtype))
            backend.asarray = lambda obj, dtype=None: self._counted(asarray(obj, dtype))
        return self

    def _counted(self, a):
        """a, its allocation counted until freed (once: asarray may hand back an array it counted)."""
        from lazytensor.core.memory import owner
        own = owner(a)
        if id(own) not in self._owners and isinstance(own, np.ndarray):
            self._owners.add(id(own))
            self._live += own.nbytes
            self.bytes = max(self.bytes, self._live)
            weakref.finalize(own, self._freed, id(own), own.nbytes)
        return a

    def _freed(self, key: int, nbytes: int) -> None:
        self._owners.discard(key)
        self._live -= nbytes

    def __exit__(self, *exc):
        if self.device == "cuda":
            import cupy
            cupy.cuda.set_allocator(self._previous)
        else:
            for name, previous in self._previous.items():
                if previous is None:
                    delattr(self._backend, name)
                else:
                    setattr(self._backend, name, previous)
            self.resident = _peak_rss()
        return False

    def describe(self) -> str:
        if self.bytes is None:
            return "not known on this platform"
        if self.device == "cuda":
            return f"{format_bytes(self.bytes)} (CuPy memory pool high-water mark)"
        resident = "" if self.resident is None else f"; peak resident set of the process {format_bytes(self.resident)}"
        return f"{format_bytes(self.bytes)} (high-water mark of lazytensor's CPU arrays{resident})"


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
