"""Progress bars (lazytensor.cbr.progress) on long work: tqdm where installed and on a terminal,
the plain loop otherwise."""
from __future__ import annotations

import sys

from lazytensor.cbr.progress import progress


def test_without_tqdm_the_items_come_back_as_they_are(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    items = ["elementwise", "reduction"]
    assert progress(items, "bench") is items


def test_with_tqdm_off_a_terminal_the_output_stays_plain(capsys):
    assert list(progress(range(3), "tune", unit="shape")) == [0, 1, 2]
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_the_benchmark_suites_run_under_a_bar(monkeypatch):
    """run_suites iterates its suites through progress (a fake suite keeps it fast)."""
    import lazytensor.bench.suites as suites
    seen = []
    monkeypatch.setattr(suites, "progress", lambda items, desc, unit="it", total=None: seen.append(desc) or items)
    monkeypatch.setitem(sys.modules, "lazytensor.bench.cpu", _fake_cpu_bench())
    lines = []
    suites.run_suites("cpu", "elementwise", lines.append)
    assert seen == ["bench on cpu"] and lines == ["elementwise ran", ""]


def _fake_cpu_bench():
    module = type(sys)("lazytensor.bench.cpu")
    module.run_cpu_bench = lambda print_fn: print_fn("elementwise ran")
    return module
