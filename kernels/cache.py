"""KernelCache: compiled kernels by structural key, in memory, built once even under threads.

The disk half belongs to each backend's compiler (numba's cache files next to the generated
module for the CPU, CuPy's kernel cache for CUDA); `cache_dir` says where they live.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path


def cache_dir() -> Path:
    """LAZYTENSOR_CACHE_DIR, else the user cache folder."""
    env = os.environ.get("LAZYTENSOR_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lazytensor"


class KernelCache:
    def __init__(self):
        self._kernels: dict = {}
        self._locks: dict = {}
        self._guard = threading.Lock()

    def get(self, key):
        return self._kernels.get(key)

    def get_or_build(self, key, build):
        """The kernel for key; `build()` runs at most once per key, other threads wait for it."""
        kernel = self._kernels.get(key)
        if kernel is not None:
            return kernel
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            kernel = self._kernels.get(key)
            if kernel is None:
                kernel = build()
                self._kernels[key] = kernel
        return kernel

    def clear(self):
        with self._guard:
            self._kernels.clear()
            self._locks.clear()

    def __len__(self):
        return len(self._kernels)
