"""The background compiler (kernels/background_compile.py) lowers Python's switch interval while it
works, so that an interpreted call beside a compile gets the GIL back within half a millisecond,
and restores it once the queue is empty (unless the program set its own meanwhile)."""
import sys
import threading

import pytest

from lazytensor.kernels import launch_log
from lazytensor.kernels.background_compile import SWITCH_INTERVAL, BackgroundCompiler

pytestmark = pytest.mark.compiled_tier      # (a compile runs in each)


def test_the_switch_interval_is_short_while_compiling_and_restored_after():
    before = sys.getswitchinterval()
    assert before > SWITCH_INTERVAL
    seen = []
    go = threading.Event()
    compiler = BackgroundCompiler()
    compiler.submit("a", lambda: (go.wait(5), seen.append(sys.getswitchinterval())))
    compiler.submit("b", lambda: seen.append(sys.getswitchinterval()))
    go.set()
    assert compiler.drain(5)
    assert seen == [SWITCH_INTERVAL, SWITCH_INTERVAL]
    assert sys.getswitchinterval() == before


def test_a_program_s_own_interval_is_kept():
    before = sys.getswitchinterval()
    compiler = BackgroundCompiler()
    try:
        compiler.submit("a", lambda: sys.setswitchinterval(0.002))
        assert compiler.drain(5)
        assert sys.getswitchinterval() == 0.002
    finally:
        sys.setswitchinterval(before)


def test_a_failed_job_restores_it_too():
    before = sys.getswitchinterval()
    compiler = BackgroundCompiler()
    compiler.submit("a", lambda: 1 / 0)
    assert compiler.drain(5)
    assert compiler.failed("a") and sys.getswitchinterval() == before


def test_a_compile_s_run_is_no_launch_of_the_caller_s_profile():
    compiler = BackgroundCompiler()
    rec = launch_log.KernelRecord("k", "cpu", "scan", 30, "compiled", 0.1)
    with launch_log.listening([]) as seen:
        compiler.submit("a", lambda: launch_log.record(rec))    # as a scan's compile runs its kernel once
        assert compiler.drain(5)
        launch_log.record(rec)                                   # the caller's own launch
    assert seen == [rec]


def test_the_compile_s_open_flag_closes_when_its_kernel_arrives_or_fails():
    compiler = BackgroundCompiler()
    compiler.submit("ok", lambda: None)
    compiler.submit("bad", lambda: 1 / 0)
    flags = compiler.open_flag("ok"), compiler.open_flag("bad")
    assert compiler.drain(5)
    assert flags == ([False], [False]) and compiler.open_flag("never") is None
