"""Records of kernel launches for lt.profile(): backends append, only while someone listens."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass

listeners: list = []   # lists that collect KernelRecord; empty means nobody is profiling


@dataclass(frozen=True)
class KernelRecord:
    name: str               # kernel name (a short hash of its source)
    backend: str            # "cpu" or "cuda"
    kind: str               # "elementwise", "reduction", "conv", ...
    elements: int           # elements written
    cache: str              # "memory" (hit), "disk" (loaded from the disk cache) or "compiled" (miss)
    compile_seconds: float  # time spent building the kernel in this call (0 on a memory hit)
    config: str = ""        # launch configuration (grid, block) or CPU variant


@contextmanager
def listening(sink: list):
    """Collect the records of launches inside the block into `sink`."""
    listeners.append(sink)
    try:
        yield sink
    finally:
        # By identity: two empty sinks are equal lists, and list.remove would take the first.
        for i in range(len(listeners) - 1, -1, -1):
            if listeners[i] is sink:
                del listeners[i]
                break


_this_thread = threading.local()


def quiet_thread() -> None:
    """Launches this thread makes from now on are recorded nowhere: the background compiler's runs
    (a kernel run once on scratch memory to compile it) are launches of no caller's."""
    _this_thread.quiet = True


@contextmanager
def quiet():
    """Launches this thread makes inside the block are recorded nowhere."""
    before = getattr(_this_thread, "quiet", False)
    _this_thread.quiet = True
    try:
        yield
    finally:
        _this_thread.quiet = before


def record(rec: KernelRecord) -> None:
    if getattr(_this_thread, "quiet", False):
        return
    for sink in listeners:
        sink.append(rec)
