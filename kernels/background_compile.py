"""Compiling kernels off the caller's thread, so that no call waits for numba: in compile worker
processes (kernels/compile_worker.py) that fill the disk cache and outlive the program, and one
thread here that loads what they compiled (or compiles itself where no worker can be started).

Design: docs/design/tiers.md, sections "kernels/background_compile.py" and "kernels/compile_worker.py".
"""
from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
import threading
import time

from lazytensor.kernels import launch_log
from lazytensor.kernels.compile_worker import LEAN_START
from lazytensor.kernels.tier import interpreter_forced

# While the thread compiles or loads, the interpreter's caller gets the GIL back from it within this
# many seconds instead of Python's 5 ms: numba is Python code that holds the GIL, and every NumPy
# ufunc of an interpreted call releases and retakes it (a 2^20-element first call took 36-190 ms
# beside a compile, 22-36 ms with the shorter interval; NumPy alone, 2-11 ms).
SWITCH_INTERVAL = 0.000125     # (a value sys.getswitchinterval() gives back exactly)

# A worker that died is replaced for the jobs after it, this many times in a process; then the
# thread compiles.
MAX_WORKER_DEATHS = 3

IN_WORKER = "LAZYTENSOR_IN_COMPILE_WORKER"


def wait_for_compiler() -> bool:
    return os.environ.get("LAZYTENSOR_JIT_WAIT", "") not in ("", "0") and not interpreter_forced()


def worker_count() -> int:
    """LAZYTENSOR_COMPILE_WORKERS (0: compile on the thread here), else 1."""
    value = os.environ.get("LAZYTENSOR_COMPILE_WORKERS", "")
    try:
        return max(0, int(value)) if value else 1
    except ValueError:
        raise ValueError(f"LAZYTENSOR_COMPILE_WORKERS={value!r}: expected a number of processes, 0 or more") from None


class _Worker:
    """One compile worker process, its writer thread (a job never waits for the pipe) and its reader."""

    def __init__(self, compiler, warm):
        env = dict(os.environ, **{IN_WORKER: "1"})
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LEAN_START, *warm],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True, env=env, close_fds=True)
        self.pid = self.proc.pid
        self.compiler = compiler
        self.outstanding: dict = {}          # job id -> (key, on_item)
        self.died = None                     # how it died, once it has
        self.ready = threading.Event()
        self._frames: queue.Queue = queue.Queue()
        threading.Thread(target=self._write, name="lazytensor-compile-writer", daemon=True).start()
        threading.Thread(target=self._read, name="lazytensor-compile-reader", daemon=True).start()

    def send(self, job_id, key, on_item, fn, args) -> None:
        with self.compiler._guard:
            dead = self.died
            if dead is None:
                self.outstanding[job_id] = (key, on_item)
        if dead is None:
            self._frames.put(pickle.dumps((job_id, fn, args), protocol=pickle.HIGHEST_PROTOCOL))
        else:                               # (it died since it was chosen)
            self.compiler._lose(key, self.pid, dead)

    def _write(self) -> None:
        stdin = self.proc.stdin
        while True:
            frame = self._frames.get()
            try:
                stdin.write(frame)
                stdin.flush()
            except (OSError, ValueError):    # it died: its reader reports that
                return

    def _read(self) -> None:
        stdout = self.proc.stdout
        while True:
            try:
                job_id, what, value = pickle.load(stdout)
            except Exception:  # noqa: BLE001  (end of the pipe, or a reply cut short: it died)
                break
            if what == "ready":
                self.ready.set()
                continue
            key, on_item = self.outstanding.get(job_id, (None, None))
            if what == "item":
                self.compiler._enqueue(key, lambda item=value, f=on_item: f(item), finishes=False)
            else:
                self.outstanding.pop(job_id, None)
                self.compiler._remote_finished(key, None if what == "done" else value)
        code = self.proc.wait()             # (reaped here: no zombie)
        why = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        self.compiler._worker_died(self, why)


class BackgroundCompiler:
    """Compile jobs, each submitted once per key: remote jobs run in a compile worker process and
    hand their results to the loading thread here; local jobs run on that thread."""

    def __init__(self, warm=()):
        self._jobs: queue.Queue = queue.Queue()
        self._submitted: set = set()
        self._failed: set = set()
        self._lost: dict = {}               # key -> why its worker's death lost it
        self._where: dict = {}              # key -> where it compiles (for explain)
        self._times: dict = {}              # key -> [submitted, arrived or None] (perf_counter)
        self._open: dict = {}               # key -> [True] until its kernel arrived, failed or was lost
        self._guard = threading.Lock()
        self._thread = None
        self._idle = threading.Condition(self._guard)
        self._running = 0
        self._interval = None      # the switch interval before the thread lowered it, while it works
        self._warm = tuple(warm)
        self._workers: list = []
        self._deaths = 0
        self._no_worker = None if worker_count() and IN_WORKER not in os.environ else \
            "LAZYTENSOR_COMPILE_WORKERS=0" if IN_WORKER not in os.environ else "inside a compile worker"
        self._next_id = 0
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        """In a forked child: the parent's thread, workers and pipes are not this process's; jobs
        under way there are submitted again here when a call asks."""
        self._jobs = queue.Queue()
        self._guard = threading.Lock()
        self._idle = threading.Condition(self._guard)
        self._thread = None
        self._workers = []
        self._interval = None
        self._running = 0
        pending = {key for key, (_, arrived) in self._times.items() if arrived is None}
        self._submitted -= pending
        for key in pending:
            self._close(key)
            self._where.pop(key, None)
            self._times.pop(key, None)

    # -- submitting -----------------------------------------------------------------------------
    def submit(self, key, job) -> None:
        """Run job() unless a job with this key was submitted before: a RemoteJob in a compile
        worker where one can be used, else (and any other job) on the thread here."""
        worker = self._worker() if isinstance(job, RemoteJob) else None
        where = getattr(job, "where", "compiled on a thread of this process") if worker is None else \
            f"compiled in the compile worker process {worker.pid}"
        if interpreter_forced():        # (never compiled, where the interpreter tier is forced)
            return
        if not self._claim(key, where):
            return
        if worker is None:
            self._enqueue(key, job)
            return
        with self._guard:
            self._next_id += 1
            job_id = self._next_id
        worker.send(job_id, key, job.on_item, job.fn, job.args)

    def start(self, prepare=None) -> None:
        """Start the first worker now (it imports numba while the program makes its arrays), and
        run prepare() on the thread here (importing what loading a kernel needs)."""
        if self._worker() is not None and prepare is not None:
            self._enqueue(None, prepare, finishes=False)

    def _claim(self, key, where) -> bool:
        with self._guard:
            if key in self._submitted:
                return False
            self._submitted.add(key)
            self._running += 1
            self._where[key] = where
            self._times[key] = [time.perf_counter(), None]
            self._open[key] = [True]
        return True

    def _enqueue(self, key, job, finishes=True) -> None:
        with self._guard:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="lazytensor-compiler", daemon=True)
                self._thread.start()
        self._jobs.put((key, job, finishes))

    # -- workers --------------------------------------------------------------------------------
    def _worker(self):
        """The worker with the fewest jobs, a new one while there are fewer than worker_count()
        and each has some; None where no worker can be used."""
        if self._no_worker is not None:
            return None
        with self._guard:
            live = [w for w in self._workers if w.proc.returncode is None]
            if live and (len(live) >= worker_count() or any(not w.outstanding for w in live)):
                return min(live, key=lambda w: len(w.outstanding))
            try:
                worker = _Worker(self, self._warm)
            except OSError as e:
                self._no_worker = f"no compile worker process could be started ({type(e).__name__}: {e})"
                return live[0] if live else None
            self._workers.append(worker)
            return worker

    def _remote_finished(self, key, error) -> None:
        self._enqueue(key, (lambda: None) if error is None else _Raise(error))

    def _worker_died(self, worker, why) -> None:
        with self._guard:
            worker.died = why
            if worker in self._workers:
                self._workers.remove(worker)
            self._deaths += 1
            if self._deaths >= MAX_WORKER_DEATHS and self._no_worker is None:
                self._no_worker = f"{self._deaths} compile worker processes died"
            lost = list(worker.outstanding.values())
            worker.outstanding.clear()
        for key, _ in lost:
            self._lose(key, worker.pid, why)

    def _lose(self, key, pid, why) -> None:
        self._lost[key] = f"the compile worker process {pid} {why} while compiling it"
        self._close(key)
        self._enqueue(key, lambda: None)

    # -- asking ---------------------------------------------------------------------------------
    def submitted(self, key) -> bool:
        return key in self._submitted

    def failed(self, key) -> bool:
        return key in self._failed

    def open_flag(self, key):
        """A list whose item is True while this key's compile is under way (not arrived, failed
        or lost): what a call that keeps serving the key from the interpreter checks, without
        hashing the key again. None if it was never submitted."""
        return self._open.get(key)

    def _close(self, key) -> None:
        flag = self._open.get(key)
        if flag is not None:
            flag[0] = False

    def lost(self, key) -> str | None:
        """Why this key's compile was lost with its worker (its calls stay in the interpreter tier)."""
        return self._lost.get(key)

    def state(self, key) -> str | None:
        """Where this key's compile runs or ran and, once its kernel is loaded, how long after its
        submission it arrived; None if it was never submitted."""
        if key not in self._where:
            return None
        where = self._where[key]
        if key in self._lost:
            return f"{self._lost[key]}; its calls stay in the interpreter tier in this process"
        if key in self._failed:
            return f"{where}: failed; the next call compiles in the foreground and raises there"
        submitted, arrived = self._times[key]
        if arrived is None:
            return f"not arrived yet: {where}, submitted {time.perf_counter() - submitted:.2f} s ago"
        return f"{where}, arrived {arrived - submitted:.2f} s after the first call"

    def arrival(self, key) -> float | None:
        """Seconds from this key's submission to its kernel being loaded here, once it has been."""
        times = self._times.get(key)
        return None if times is None or times[1] is None else times[1] - times[0]

    def where_next(self) -> str:
        """Where a new kernel would compile, for explain."""
        if self._no_worker is None:
            return "compiled in a compile worker process, which fills the disk cache"
        return f"on a thread of this process: {self._no_worker}"

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every submitted job has finished; False if `timeout` ran out first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._running == 0, timeout)

    # -- the thread -----------------------------------------------------------------------------
    def _work(self) -> None:
        launch_log.quiet_thread()       # a profile shows the caller's launches, not the compiles' runs
        while True:
            key, job, finishes = self._jobs.get()
            with self._guard:
                if self._interval is None and sys.getswitchinterval() > SWITCH_INTERVAL:
                    self._interval = sys.getswitchinterval()
                    sys.setswitchinterval(SWITCH_INTERVAL)
            try:
                job()
                times = self._times.get(key)
                if times is not None and times[1] is None and key not in self._lost:
                    times[1] = time.perf_counter()      # (the first variant loaded: calls take it)
                    self._close(key)
            except Exception:            # the next call compiles in the foreground and raises there
                self._failed.add(key)
                self._close(key)
            finally:
                with self._idle:
                    if finishes:
                        self._running -= 1
                    if self._jobs.empty() and self._interval is not None:
                        if sys.getswitchinterval() == SWITCH_INTERVAL:   # (unless the program set its own since)
                            sys.setswitchinterval(self._interval)
                        self._interval = None
                    self._idle.notify_all()


class RemoteJob:
    """A compile job for a worker: the generator function fn(*args) (picklable by name) runs
    there; each item it yields is given to on_item(item) on the thread here (loading what the
    worker compiled from the disk cache). Called, it runs `local` instead: where no worker can be
    used, or where a caller (a test) runs the jobs it was handed itself."""

    def __init__(self, fn, args, on_item, local):
        self.fn, self.args, self.on_item, self.local = fn, args, on_item, local

    def __call__(self):
        return self.local()


class LocalJob:
    """A job for the thread here, saying where its kernel comes from (for explain)."""

    def __init__(self, fn, where):
        self.fn, self.where = fn, where

    def __call__(self):
        return self.fn()


class _Raise:
    """A job that raises the worker's error, on the thread: the key is then failed."""

    def __init__(self, error):
        self.error = error

    def __call__(self):
        raise RuntimeError(f"the compile worker failed: {self.error}")
