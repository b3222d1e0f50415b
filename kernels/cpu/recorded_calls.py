"""The calls a compile-by-running job would make (a reduction, scan or scatter kernel run once on
scratch memory so that numba compiles it for these argument types), recorded without numba: the
kernel's text and each function's argument types, what the compile worker needs.

Design: docs/design/tiers.md, section "kernels/compile_worker.py".
"""
from __future__ import annotations

import threading

import numpy as np

from lazytensor.kernels import launch_log

_local = threading.local()


class Recording:
    """The kernel texts built and the calls made while recording on this thread."""

    def __init__(self):
        self.sources: list = []
        self.calls: list = []
        self.module = _Module(self)


class _Module:
    def __init__(self, recording):
        self._recording = recording

    def __getattr__(self, name):
        return _Function(self._recording, name)


class _Function:
    """Stands in for a numba dispatcher: nothing compiled, each call recorded."""
    overloads: dict = {}

    def __init__(self, recording, name):
        self._recording, self.name = recording, name

    def __call__(self, *args):
        self._recording.calls.append((self.name, tuple(_describe(a) for a in args)))


def _describe(a):
    """An array as (dtype, ndim, layout, readonly, aligned) (numba's type of it); a scalar as
    itself (numba types it when compiling)."""
    if isinstance(a, np.ndarray):
        flags = a.flags
        layout = "C" if flags.c_contiguous else ("F" if flags.f_contiguous else "A")
        return (a.dtype, a.ndim, layout, not flags.writeable, flags.aligned)
    if isinstance(a, (bool, int, float, np.generic)):
        return a
    raise TypeError(f"cannot describe a kernel argument of type {type(a).__name__}")


def current() -> Recording | None:
    """The recording under way on this thread, if any (the backend's kernel builder asks)."""
    return getattr(_local, "recording", None)


def record(job) -> Recording:
    """Run job() recording, on this thread: kernels it builds are stand-ins, nothing is compiled,
    run or profiled."""
    recording = Recording()
    _local.recording = recording
    try:
        with launch_log.quiet():
            job()
    finally:
        _local.recording = None
    return recording
