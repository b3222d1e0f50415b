"""The compile worker: `python -m lazytensor.kernels.compile_worker MODULE...`, a process that runs
compile jobs for its parent and outlives it, so that a short script's kernels still reach the disk cache.

Design: docs/design/tiers.md, section "kernels/compile_worker.py".
"""
from __future__ import annotations

import importlib
import os
import pickle
import select
import signal
import sys
import time
import traceback

NICENESS = 10

# `python -c LEAN_START MODULE...`: the worker without lazytensor's package __init__ (the whole
# library, a second of the first kernel's wait on the 2-core machine): `lazytensor` is a bare
# package module over the real folder, so only the kernels' own modules are imported.
LEAN_START = """
import importlib.util, sys, types
spec = importlib.util.find_spec("lazytensor")
package = types.ModuleType("lazytensor")
package.__path__, package.__spec__, package.__file__ = list(spec.submodule_search_locations), spec, spec.origin
sys.modules["lazytensor"] = package
from lazytensor.kernels.compile_worker import main
sys.exit(main(sys.argv[1:]))
"""


def _send(out, message) -> bool:
    """Write one reply; False once the parent has gone (the jobs still run: their results are the
    disk cache's)."""
    if out is None:
        return False
    try:
        pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()
        return True
    except (OSError, ValueError):        # (a closed pipe: BrokenPipeError, or ValueError on a closed file)
        return False


class PipeReader:
    """The jobs' pipe, read for pickle.load, that can tell whether a job is waiting: in its buffer
    or in the pipe (a buffered file's read-ahead hides the next job from select)."""

    def __init__(self, fd: int):
        self.fd, self._buffer = fd, bytearray()

    def _fill(self) -> bool:
        chunk = os.read(self.fd, 1 << 16)
        self._buffer += chunk
        return bool(chunk)

    def read(self, n: int = -1) -> bytes:
        while (n < 0 or len(self._buffer) < n) and self._fill():
            pass
        n = len(self._buffer) if n < 0 else min(n, len(self._buffer))
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        return data

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def readline(self) -> bytes:
        while b"\n" not in self._buffer and self._fill():
            pass
        end = self._buffer.find(b"\n") + 1 or len(self._buffer)
        return self.read(end)

    def waiting(self) -> bool:
        if self._buffer:
            return True
        try:
            return bool(select.select([self.fd], [], [], 0)[0])
        except (OSError, ValueError):
            return True


def _idle(source) -> bool:
    """Whether no job is waiting on `source` (a PipeReader, or a pipe)."""
    if isinstance(source, PipeReader):
        return not source.waiting()
    try:
        return not select.select([source], [], [], 0)[0]
    except (OSError, ValueError):
        return False


# An item a job yields to say that the rest of it can wait: the worker sends nothing for it and
# resumes the job when no other job is waiting (a kernel's other variants, after every waiting
# kernel's first).
LATER = "lazytensor-compile-worker: later"


def _step(job, out):
    """Run `job` (job id, generator, started) to its next LATER or its end; returns the stream to
    reply on (None once the parent has gone) and whether the job has more."""
    job_id, items, started = job
    try:
        for item in items:
            if item == LATER:
                return out, True
            if not _send(out, (job_id, "item", item)):
                out = None
        reply = (job_id, "done", time.perf_counter() - started)
    except Exception as e:  # noqa: BLE001  (the parent compiles it again in the foreground and raises there)
        reply = (job_id, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}")
    if not _send(out, reply):
        out = None
    return out, False


def serve(source, out, when_idle=()) -> None:
    """Run each job read from `source` (pickled (job id, function, arguments); the function a
    generator whose items are sent back as they come) and reply (job id, "item", item), then
    (job id, "done", seconds) or (job id, "error", text). A job that yields LATER is resumed once
    no job is waiting, the earliest first. Ends at end of input, once every job has finished. Each
    of `when_idle` runs once, the first time no job is waiting and none waits to be resumed."""
    when_idle = list(when_idle)
    later = []
    while True:
        while (later or when_idle) and _idle(source):
            if later:
                job = later.pop(0)
                out, more = _step(job, out)
                if more:
                    later.insert(0, job)
            else:
                when_idle.pop(0)()
        try:
            job_id, fn, args = pickle.load(source)
        except EOFError:
            for job in later:           # (the parent has gone: the disk cache still gets them)
                more = True
                while more:
                    out, more = _step(job, out)
            return
        job = (job_id, iter(()), time.perf_counter())
        try:
            job = (job_id, fn(*args), job[2])
        except Exception as e:  # noqa: BLE001
            _send(out, (job_id, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}"))
            continue
        out, more = _step(job, out)
        if more:
            later.append(job)


def main(argv) -> int:
    # An interrupt of the parent's terminal is the parent's; the worker finishes what it was given.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Below the parent's priority: on a machine with few cores, the calls the interpreter tier
    # serves meanwhile keep their core (the compile only fills the disk cache for later).
    if hasattr(os, "nice"):
        try:
            os.nice(NICENESS)
        except OSError:
            pass
    source, out = PipeReader(sys.stdin.fileno()), sys.stdout.buffer
    sys.stdout = sys.stderr          # (nothing a job prints may corrupt the replies)
    later = []
    for name in argv:                # warmed up before the first job: importing numba takes a second
        module = importlib.import_module(name)
        if hasattr(module, "warm_up"):
            module.warm_up(lambda: _idle(source))
        if hasattr(module, "warm_up_when_idle"):
            later.append(module.warm_up_when_idle)
    _send(out, (None, "ready", os.getpid()))
    serve(source, out, later)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
