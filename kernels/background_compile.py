"""Compiling kernels off the caller's thread, so that no call waits for numba.

A call whose kernel is not compiled yet for its argument types runs through the interpreter tier
(kernels/cpu/interpret.py) and hands the compile to one worker thread here; later calls find the
compiled kernel. A job that fails is not retried in the background: the next call of that kernel
compiles in the foreground, where the error reaches the caller. LAZYTENSOR_JIT_WAIT=1 makes every call wait for its kernel instead (tests of the
generated code, benchmarks that time the compiled kernel from its first call).
"""
from __future__ import annotations

import os
import queue
import sys
import threading

from lazytensor.kernels import launch_log
from lazytensor.kernels.tier import interpreter_forced

# While the worker compiles, the interpreter's caller gets the GIL back from it within this many
# seconds instead of Python's 5 ms: numba's compiler is Python code that holds the GIL, and every
# NumPy ufunc of an interpreted call releases and retakes it (a 2^20-element first call took 36-190 ms
# beside a compile, 22-36 ms with the shorter interval; NumPy alone, 2-11 ms).
SWITCH_INTERVAL = 0.0005


def wait_for_compiler() -> bool:
    return os.environ.get("LAZYTENSOR_JIT_WAIT", "") not in ("", "0") and not interpreter_forced()


class BackgroundCompiler:
    """One daemon thread working through compile jobs, each submitted once per key."""

    def __init__(self):
        self._jobs: queue.Queue = queue.Queue()
        self._submitted: set = set()
        self._failed: set = set()
        self._guard = threading.Lock()
        self._thread = None
        self._idle = threading.Condition(self._guard)
        self._running = 0
        self._interval = None      # the switch interval before the worker lowered it, while it works

    def submit(self, key, job) -> None:
        """Run job() on the worker unless a job with this key was submitted before (never, where
        the interpreter tier is forced)."""
        if interpreter_forced():
            return
        with self._guard:
            if key in self._submitted:
                return
            self._submitted.add(key)
            self._running += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="lazytensor-compiler", daemon=True)
                self._thread.start()
        self._jobs.put((key, job))

    def failed(self, key) -> bool:
        return key in self._failed

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every submitted job has finished; False if `timeout` ran out first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._running == 0, timeout)

    def _work(self) -> None:
        launch_log.quiet_thread()       # a profile shows the caller's launches, not the compiles' runs
        while True:
            key, job = self._jobs.get()
            with self._guard:
                if self._interval is None and sys.getswitchinterval() > SWITCH_INTERVAL:
                    self._interval = sys.getswitchinterval()
                    sys.setswitchinterval(SWITCH_INTERVAL)
            try:
                job()
            except Exception:            # the next call compiles in the foreground and raises there
                self._failed.add(key)
            finally:
                with self._idle:
                    self._running -= 1
                    if self._running == 0 and self._interval is not None:
                        if sys.getswitchinterval() == SWITCH_INTERVAL:   # (unless the program set its own since)
                            sys.setswitchinterval(self._interval)
                        self._interval = None
                    self._idle.notify_all()
