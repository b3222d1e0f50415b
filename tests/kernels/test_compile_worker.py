"""The compile worker process (kernels/compile_worker.py): a script that exits before its kernel has
compiled still leaves it in the disk cache, and its next run loads it from there; a worker that dies
leaves the program in the interpreter tier, saying so, with no zombie and no hang."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

SCRIPT = textwrap.dedent("""
    import sys, time, numpy as np, lazytensor as lt
    from lazytensor.kernels.backend import backend_for
    compiler = backend_for("cpu").compiler
    a = lt.asarray(np.linspace(-1, 1, 1 << 20, dtype=np.float32))
    expr = lambda: lt.relu(a * 3 - 1)
    with lt.profile() as p:
        y = lt.evaluate(expr())
    assert np.array_equal(y.numpy(), np.maximum(np.linspace(-1, 1, 1 << 20, dtype=np.float32) * 3 - 1, 0))
    print(p.kernels[0].name, *[w.pid for w in compiler._workers], flush=True)
    if sys.argv[1] == "wait":
        deadline = time.perf_counter() + 240
        while p.kernels[0].name == "interpreter" and time.perf_counter() < deadline:
            time.sleep(0.05)
            with lt.profile() as p:
                lt.evaluate(expr())
        print(p.kernels[0].name, p.kernels[0].cache, len(compiler._workers))
        print([line.strip() for line in lt.explain(expr()).splitlines() if "tier:" in line][0])
""")


def _run(tmp_path, mode, timeout=300):
    env = dict(os.environ, LAZYTENSOR_JIT_WAIT="0", LAZYTENSOR_CACHE_DIR=str(tmp_path), LAZYTENSOR_DEVICE="cpu")
    env.pop("LAZYTENSOR_COMPILE_WORKERS", None)
    run = subprocess.run([sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout.splitlines()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_short_script_s_kernel_reaches_the_disk_and_its_next_run_loads_it(tmp_path):
    (first,) = _run(tmp_path, "exit")
    name, pid = first.split()
    assert name == "interpreter"
    # the script has exited while its worker still compiles: the exit did not wait for it
    assert _alive(int(pid)), "the worker had finished before the script exited: nothing shows the exit did not wait"
    assert _wait_gone(int(pid), 240), "the compile worker did not exit once its jobs were done"
    assert list((tmp_path / "cpu").glob("lt_*.py")) and list((tmp_path / "cpu" / "__pycache__").glob("*.nbc"))
    lines = _run(tmp_path, "wait")
    assert lines[1].startswith("lt_") and lines[1].split()[1] == "memory", lines
    assert "loaded from the disk cache by a thread of this process" in lines[2], lines


KILL = textwrap.dedent("""
    import os, signal, time, numpy as np, lazytensor as lt
    from lazytensor.kernels.backend import backend_for
    compiler = backend_for("cpu").compiler
    a = lt.asarray(np.arange(1000, dtype=np.float32))
    expr = lambda: a * 3 + 1
    with lt.profile() as p:
        lt.evaluate(expr())
    (worker,) = compiler._workers
    os.kill(worker.pid, signal.SIGKILL)
    assert compiler.drain(60), "a job of the dead worker never finished"
    with lt.profile() as p:
        got = lt.evaluate(expr()).numpy()
    assert (got == np.arange(1000, dtype=np.float32) * 3 + 1).all()
    assert [k.name for k in p.kernels] == ["interpreter"], p.kernels
    print(worker.pid)
    print([line.strip() for line in lt.explain(expr()).splitlines() if "tier:" in line][0])
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_killed_mid_compile_leaves_the_interpreter_tier_serving_and_says_so(tmp_path):
    env = dict(os.environ, LAZYTENSOR_JIT_WAIT="0", LAZYTENSOR_CACHE_DIR=str(tmp_path), LAZYTENSOR_DEVICE="cpu")
    env.pop("LAZYTENSOR_COMPILE_WORKERS", None)
    run = subprocess.run([sys.executable, "-c", KILL], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    pid, tier = run.stdout.splitlines()
    assert f"the compile worker process {pid} killed by signal 9 while compiling it" in tier, tier
    assert "interpreter" in tier
    assert not _alive(int(pid))        # reaped: no zombie


def test_a_job_that_fails_in_the_worker_marks_its_key_failed(tmp_path, monkeypatch):
    """A compile error in the worker reaches the program as a failed key: its next call compiles in
    the foreground, where the error reaches the caller."""
    from lazytensor.kernels.background_compile import BackgroundCompiler, RemoteJob
    monkeypatch.setenv("LAZYTENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LAZYTENSOR_COMPILE_WORKERS", "1")
    monkeypatch.setenv("PYTHONPATH", os.path.dirname(os.path.dirname(os.path.dirname(__file__))))  # (this module)
    compiler = BackgroundCompiler()
    items = []
    compiler.submit("k", RemoteJob(_failing_job, (3,), items.append, lambda: None))
    assert compiler.drain(120)
    assert compiler.failed("k") and items == [0, 1, 2]
    assert "failed" in compiler.state("k")


def _failing_job(n):
    yield from range(n)
    raise ValueError("no kernel")


RECORDED = textwrap.dedent("""
    import numpy as np, lazytensor as lt
    from lazytensor.kernels.backend import backend_for
    x = np.arange(3000, dtype=np.float32).reshape(100, 30) % 7
    a = lt.asarray(x)
    cases = [(lambda: lt.evaluate(lt.sum(a * 2, axis=0)).numpy(), (x * 2).sum(0)),
             (lambda: lt.evaluate(lt.cumsum(a, axis=1)).numpy(), np.cumsum(x, 1))]
    for run, want in cases:
        with lt.profile() as p:
            assert np.array_equal(run(), want)
        assert p.kernels[0].name == "interpreter", p.kernels
        assert "compiled in the compile worker process" in p.kernels[0].config, p.kernels[0].config
    assert backend_for("cpu").compiler.drain(240)
    for run, want in cases:
        with lt.profile() as p:
            assert np.array_equal(run(), want)
        assert p.kernels[0].name.startswith("lt_") and p.kernels[0].cache == "memory", p.kernels
    print("ok")
""")


def test_reductions_and_scans_compile_in_the_worker_from_their_recorded_calls(tmp_path):
    env = dict(os.environ, LAZYTENSOR_JIT_WAIT="0", LAZYTENSOR_CACHE_DIR=str(tmp_path), LAZYTENSOR_DEVICE="cpu")
    env.pop("LAZYTENSOR_COMPILE_WORKERS", None)
    run = subprocess.run([sys.executable, "-c", RECORDED], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_a_recording_builds_no_kernel_and_runs_nothing(monkeypatch):
    """recorded_calls: the reduction's compile-by-running job, recorded, gives its kernel's text
    and the argument types of each function it would call, keeps nothing in the kernel cache
    and writes nothing a profile sees."""
    import numpy as np

    import lazytensor as lt
    from lazytensor.kernels.backend import backend_for
    from lazytensor.kernels.cache import KernelCache
    from lazytensor.kernels.cpu import recorded_calls
    backend = backend_for("cpu")
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    monkeypatch.setattr(backend, "kernels", KernelCache())
    jobs = []
    monkeypatch.setattr(backend, "submit_recorded", lambda key, job: jobs.append(job))
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert np.array_equal(lt.evaluate(lt.sum(lt.asarray(x) * 2, axis=0)).numpy(), (x * 2).sum(0))
    (job,) = jobs
    with lt.profile() as p:
        recording = recorded_calls.record(job)
    assert len(backend.kernels) == 0 and p.kernels == []
    assert len(recording.sources) == 1 and "def reduce_main_seq" in recording.sources[0]
    names = [name for name, _ in recording.calls]
    assert names[0].startswith("reduce_main") and all(isinstance(args, tuple) for _, args in recording.calls)
    assert any(a == (np.dtype(np.float64), 2, "C", False, True) for a in recording.calls[0][1])


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="needs os.getpriority")
def test_the_worker_runs_below_its_parent_s_priority():
    import pickle

    from lazytensor.kernels.compile_worker import NICENESS
    proc = subprocess.Popen([sys.executable, "-m", "lazytensor.kernels.compile_worker"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        _, what, pid = pickle.load(proc.stdout)
        assert what == "ready" and pid == proc.pid
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        assert NICENESS > 0 and os.getpriority(os.PRIO_PROCESS, proc.pid) == min(19, mine + NICENESS)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def test_the_worker_imports_the_kernels_modules_not_the_library(tmp_path, monkeypatch):
    """The worker starts without lazytensor's package __init__ (the whole library, a second of the
    first kernel's wait): its jobs see the kernels' modules only."""
    from lazytensor.kernels.background_compile import BackgroundCompiler, RemoteJob
    monkeypatch.setenv("LAZYTENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LAZYTENSOR_COMPILE_WORKERS", "1")
    monkeypatch.setenv("PYTHONPATH", os.path.dirname(os.path.dirname(os.path.dirname(__file__))))  # (this module)
    compiler = BackgroundCompiler(warm=("lazytensor.kernels.cpu.compile_jobs",))
    items = []
    compiler.submit("k", RemoteJob(_loaded_modules, (), items.append, lambda: None))
    assert compiler.drain(120)
    modules = items[0]
    assert "lazytensor.kernels.cpu.compile_jobs" in modules and "numba" in modules
    assert not [m for m in modules if m.startswith(("lazytensor.core", "lazytensor.nn", "lazytensor.plan"))]


def _loaded_modules():
    yield sorted(sys.modules)


@pytest.mark.compiled_tier
def test_a_job_waiting_at_the_warm_up_skips_its_kernel():
    """A job already waiting when numba is imported compiles first: the warm-up kernel would
    delay it by a whole compile."""
    from lazytensor.kernels.cpu import compile_jobs
    sys.modules.pop("lt_warm_up", None)
    compile_jobs.warm_up(lambda: False)
    assert "numba" in sys.modules and "lt_warm_up" not in sys.modules


def _deferring_job(name, n):
    from lazytensor.kernels.compile_worker import LATER
    yield f"{name}0"
    yield LATER
    yield from (f"{name}{i}" for i in range(1, n))


def test_a_job_s_later_items_wait_for_the_jobs_behind_it():
    """A kernel's other variants (after LATER) come after every waiting kernel's first: the jobs
    are read from the pipe, not from a read-ahead buffer that select cannot see."""
    import pickle

    from lazytensor.kernels.compile_worker import PipeReader, serve
    r, w = os.pipe()
    with os.fdopen(w, "wb") as pipe:
        for job_id, name in ((1, "a"), (2, "b")):
            pickle.dump((job_id, _deferring_job, (name, 3)), pipe)
    out_r, out_w = os.pipe()
    with os.fdopen(out_w, "wb") as out:
        serve(PipeReader(r), out)
    replies = []
    with os.fdopen(out_r, "rb") as source:
        while True:
            try:
                replies.append(pickle.load(source)[:2])
            except EOFError:
                break
    os.close(r)
    items = [(job_id, what) for job_id, what in replies]
    assert items[:2] == [(1, "item"), (2, "item")]
    assert sorted(items) == [(1, "done")] + [(1, "item")] * 3 + [(2, "done")] + [(2, "item")] * 3
