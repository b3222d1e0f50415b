"""kernels/timing.py, lazytensor's one timing module: host timers, and CUDA-event timers over a
stand-in CuPy whose events read a clock the test advances."""
from __future__ import annotations

import sys
import types

import pytest

from lazytensor.kernels import timing


def test_time_host_is_the_median_round_after_a_warm_up(monkeypatch):
    clock = iter([0.0, 1.0, 1.0, 4.0, 4.0, 6.0])       # rounds of 1, 3 and 2 seconds
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    calls = []
    assert timing.time_host(lambda: calls.append(1), repeat=3) == 2.0
    assert len(calls) == 4


class _Clock:
    """A stand-in cupy.cuda: each call of the timed function advances the GPU clock by the next cost."""

    def __init__(self, costs):
        self.now, self.costs = 0.0, iter(costs)

    def module(self):
        clock = self

        class Event:
            def record(self, stream=None):
                self.at = clock.now

            def synchronize(self):
                pass
        cuda = types.SimpleNamespace(Event=Event, get_current_stream=lambda: None,
                                     get_elapsed_time=lambda start, end: end.at - start.at)
        return types.SimpleNamespace(cuda=cuda)

    def call(self):
        self.now += next(self.costs)


@pytest.fixture
def gpu_clock(monkeypatch):
    def install(costs):
        clock = _Clock(costs)
        monkeypatch.setitem(sys.modules, "cupy", clock.module())
        return clock
    return install


def test_burst_ms_is_the_median_burst_per_call(gpu_clock):
    clock = gpu_clock([9.0] + [1.0, 1.0] + [5.0, 5.0] + [2.0, 2.0])      # a warm-up, then bursts of 1, 5, 2 ms
    assert timing.burst_ms(clock.call, bursts=3, burst=2, warmup=1) == 2.0


def test_time_launches_times_each_launch_and_gives_up_on_a_slow_warm_up(gpu_clock):
    clock = gpu_clock([3.0, 1.0, 4.0, 2.0])
    times, gave_up = timing.time_launches(clock.call, runs=3)
    assert (times, gave_up) == ([1.0, 4.0, 2.0], False) and timing.median_ms(times) == 2.0
    clock = gpu_clock([50.0])
    assert timing.time_launches(clock.call, runs=3, give_up_ms=10.0) == ([50.0], True)
