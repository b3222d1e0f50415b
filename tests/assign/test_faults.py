"""Faults never break a program or lose data: a damaged cache entry, an unusable cache folder, an
interrupt between the steps of a plan, running out of GPU memory (the runner's logic, faked on the CPU).

Cache damage is checked in a FRESH process each time (the in-memory cache would hide it): the value
is right, and exactly one CacheWarning names each damaged file.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.kernels.cache import CacheWarning

_CHILD = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import lazytensor as lt
        from lazytensor.kernels.cache import CacheWarning
        a = np.arange(24, dtype=np.float32).reshape(4, 6)
        x = lt.asarray(a)
        with lt.profile() as p:
            y = lt.evaluate(lt.sqrt(x * 0.5 + 1.0) - x / 7)       # one elementwise kernel
            ok = np.allclose(y.numpy(), np.sqrt(a * 0.5 + 1.0) - a / 7, rtol=1e-6)
            if "elementwise only" not in sys.argv:
                s = lt.evaluate((x * x).sum())                   # a reduction: main and finish kernels
                ok = ok and float(s.numpy()) == float((a.astype(np.float64) ** 2).sum())
    print(json.dumps({"ok": bool(ok), "cache": [k.cache for k in p.kernels],
                      "warnings": [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]}))
""")


def _child(cache, code: str = _CHILD, *args) -> dict:
    env = dict(os.environ, LAZYTENSOR_CACHE_DIR=str(cache), LAZYTENSOR_DEVICE="cpu")
    r = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"child process failed:\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """A cache folder filled by one child: the kernels' modules and numba's files for them."""
    cache = tmp_path_factory.mktemp("warm") / "cache"
    first = _child(cache)
    assert first["ok"] and first["warnings"] == [], first
    second = _child(cache)
    assert second["ok"] and second["cache"][0] == "disk" and second["warnings"] == [], second
    return cache


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "emptied":
        path.write_bytes(b"")
    else:
        path.write_bytes(random.Random(len(data)).randbytes(max(len(data), 64)))


@pytest.mark.compiled_tier
@pytest.mark.parametrize("rotation, how", list(enumerate(["truncated", "emptied", "random bytes"])))
def test_damaged_cache_files_are_rebuilt_with_one_warning_naming_each(warm_cache, tmp_path, rotation, how):
    """Every kind of file at once: the generated modules, and numba's index (.nbi) or data (.nbc) file of
    each compiled function (not both of one function: a damaged index never leads to its data). The
    functions take turns between index and data over the three damages."""
    cache = tmp_path / "cache"
    shutil.copytree(warm_cache, cache)
    modules = sorted((cache / "cpu").glob("lt_*.py"))
    indexes = sorted((cache / "cpu" / "__pycache__").glob("*.nbi"))
    assert len(modules) == 2 and len(indexes) == 3, sorted(p.name for p in cache.rglob("*"))
    damaged = list(modules)
    for k, index in enumerate(indexes):
        if (k + rotation) % 2 == 0:
            damaged.append(index)
        else:
            (data,) = index.parent.glob(index.name[: -len(".nbi")] + ".*.nbc")
            damaged.append(data)
    assert {p.suffix for p in damaged} == {".py", ".nbi", ".nbc"}
    for path in damaged:
        _damage(path, how)
    got = _child(cache)
    assert got["ok"], got
    assert len(got["warnings"]) == len(damaged), got["warnings"]
    for path in damaged:
        naming = [w for w in got["warnings"] if str(path) in w]
        assert len(naming) == 1, (path.name, got["warnings"])
        assert "damaged" in naming[0] and "rebuilt" in naming[0]
    again = _child(cache)                    # the rebuilt entries serve the next process, silently
    assert again["ok"] and again["cache"][0] == "disk" and again["warnings"] == [], again


@pytest.mark.compiled_tier
def test_a_cache_folder_that_is_a_file(tmp_path):
    target = tmp_path / "not-a-folder"
    target.write_text("a file where the cache folder should be")
    for cache in (target, target / "below"):
        got = _child(cache, _CHILD, "elementwise only")
        assert got["ok"] and got["cache"] == ["compiled"] * len(got["cache"]), got
        assert len(got["warnings"]) == 1, got["warnings"]
        (message,) = got["warnings"]
        assert str(cache) in message and "is a file, not a folder" in message
        assert "LAZYTENSOR_CACHE_DIR" in message and "without the disk cache" in message
    assert target.read_text() == "a file where the cache folder should be"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root writes into a read-only (chmod 555) folder anyway; the full-disk test below "
                           "covers a folder whose writes fail")
def test_a_read_only_cache_folder(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o555)
    try:
        got = _child(cache, _CHILD, "elementwise only")
    finally:
        cache.chmod(0o755)
    assert got["ok"] and len(got["warnings"]) == 1, got
    assert str(cache) in got["warnings"][0] and "not writable" in got["warnings"][0]


_FULL_DISK = textwrap.dedent("""
    # Every write under the cache folder fails as on a full disk (root is not stopped by permissions).
    import builtins, errno, io, os
    root = os.environ["LAZYTENSOR_CACHE_DIR"]
    real_open, real_os_open = builtins.open, os.open
    def full(path):
        return OSError(errno.ENOSPC, "No space left on device", str(path))
    def open_(file, mode="r", *a, **k):
        if isinstance(file, (str, os.PathLike)) and str(file).startswith(root) and any(c in mode for c in "wax+"):
            raise full(file)
        return real_open(file, mode, *a, **k)
    def os_open(path, flags, *a, **k):
        if str(path).startswith(root) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise full(path)
        return real_os_open(path, flags, *a, **k)
    builtins.open = io.open = open_
    os.open = os_open
""")


@pytest.mark.compiled_tier
def test_a_full_disk(tmp_path):
    cache = tmp_path / "cache"
    got = _child(cache, _FULL_DISK + _CHILD, "elementwise only")
    assert got["ok"] and got["cache"] == ["compiled"] * len(got["cache"]), got
    assert len(got["warnings"]) == 1, got["warnings"]
    (message,) = got["warnings"]
    assert str(cache) in message and "No space left on device" in message and "LAZYTENSOR_CACHE_DIR" in message
    assert not list(cache.rglob("*.tmp*")) and not list(cache.rglob(".*.tmp"))     # no half entries left
    again = _child(cache, _CHILD, "elementwise only")     # room again: the cache fills as usual
    assert again["ok"] and again["warnings"] == [], again


@pytest.mark.compiled_tier
def test_processes_compiling_the_same_kernels_at_once(tmp_path):
    cache = tmp_path / "cache"
    env = dict(os.environ, LAZYTENSOR_CACHE_DIR=str(cache), LAZYTENSOR_DEVICE="cpu")
    children = [subprocess.Popen([sys.executable, "-c", _CHILD, "elementwise only"], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        got = json.loads(out.strip().splitlines()[-1])
        assert got["ok"] and got["warnings"] == [], got
    assert not list(cache.rglob("*.tmp*")) and not list(cache.rglob(".*.tmp"))
    again = _child(cache)
    assert again["ok"] and again["cache"][0] == "disk" and again["warnings"] == [], again


def test_fixed_numba_kernels_have_checked_caches():
    """The numba kernels lazytensor ships (BN finalize, pooling) keep numba's cache files beside their
    package: they are checked as the generated kernels' are."""
    from lazytensor.cbr import finalize_cpu
    from lazytensor.kernels.cpu import pool as pool_cpu
    from lazytensor.kernels.cpu.numba_cache import CheckedFunctionCache

    for kernel in (*finalize_cpu._compiled(), pool_cpu._forward, pool_cpu._backward):
        assert isinstance(kernel._cache, CheckedFunctionCache), kernel


# -- the measured choices of the CBR path (small JSON files in the cache folder) -------------------------

def _choice_files():
    from lazytensor.plan.conv import dbn_choice as cbr_dbn_choice, stage1 as cbr_stage1

    from lazytensor.reuse import conv_grads
    return {"cbr_stage1.json": (cbr_stage1._DISK, [cbr_stage1.GENSTATS, "measured: a"], [cbr_stage1.REDUCTION, "b"]),
            "cbr_dbn.json": (cbr_dbn_choice._DISK, [cbr_dbn_choice.OWN, "measured: a"], [cbr_dbn_choice.CUDNN, "b"]),
            "cbr_conv_grads.json": (conv_grads._DISK, [True, "measured: a"], [False, "b"])}


@pytest.mark.parametrize("how", ["truncated", "emptied", "random bytes", "not a table"])
@pytest.mark.parametrize("name", ["cbr_stage1.json", "cbr_dbn.json", "cbr_conv_grads.json"])
def test_a_damaged_choices_file(tmp_path, monkeypatch, name, how):
    disk, a, b = _choice_files()[name]
    monkeypatch.setenv("LAZYTENSOR_CACHE_DIR", str(tmp_path))
    disk.put("gpu|shape a", a)
    disk.put("gpu|shape b", b)
    path = tmp_path / name
    assert disk.load() == {"gpu|shape a": a, "gpu|shape b": b}
    if how == "not a table":
        path.write_text(json.dumps({"gpu|shape a": ["something else", 3]}))
    else:
        _damage(path, how)
    with pytest.warns(CacheWarning) as record:
        assert disk.get("gpu|shape a") is None
    assert len(record) == 1 and str(path) in str(record[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        disk.put("gpu|shape c", a)                                  # measured again
        assert disk.load() == {"gpu|shape c": a}
    assert [p.name for p in tmp_path.iterdir()] == [name]           # no temporary left


def test_choices_in_an_unusable_folder(tmp_path, monkeypatch):
    from lazytensor.plan.conv import stage1 as cbr_stage1

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("LAZYTENSOR_CACHE_DIR", str(blocker / "cache"))
    with pytest.warns(CacheWarning, match="is a file, not a folder"):
        cbr_stage1._DISK.put("gpu|shape", [cbr_stage1.GENSTATS, "measured"])
    assert cbr_stage1._DISK.load() == {}
    for disk, a, _ in _choice_files().values():
        disk.put("gpu|shape", a)
        assert disk.load() == {}


# -- experience tables: unreadable files and entries, winners that do not build ----------------------------

class FakeGraph:
    """The part of a cuDNN ConvGraph that plan choice uses: plan names, and which plans build."""

    def __init__(self, names, broken=()):
        from lazytensor.cbr.conv_key import ConvKey
        from lazytensor.cbr.cudnn_graphs import GraphKind

        self.kind = GraphKind.CONV
        self.key = ConvKey.of((2, 8, 8, 16), (16, 3, 3, 16), "float16", 1, 1, 1)
        self.names, self.broken = list(names), set(broken)
        self.plan_count = len(self.names)

    def plan_name(self, i):
        return self.names[i]

    def build_plan(self, i):
        if self.names[i] in self.broken:
            raise RuntimeError(f"CUDNN_STATUS_NOT_SUPPORTED: {self.names[i]} does not build on this cuDNN")
        return 64 * i


def _table(graph, entry, path="tables/h200.json"):
    from lazytensor.cbr.experience_table import ExperienceTable

    table = ExperienceTable("test gpu", 1)
    table.record(graph.kind, graph.key, entry)
    table.files[graph.key.table_key()] = path
    return table


def _ranked(**names):
    return {rank: {"name": name, "index": 0, "median_ms": 0.1, "workspace_bytes": 0} for rank, name in names.items()}


@pytest.mark.parametrize("broken, rank, name", [
    ((), "winner", "eng2"),
    (("eng2",), "backup1", "eng1"),
    (("eng2", "eng1"), "backup2", "eng3"),
])
def test_a_table_plan_that_does_not_build_falls_back_to_the_next_rank(broken, rank, name):
    from lazytensor.cbr.cudnn_cache import ConvGraphCache

    graph = FakeGraph(["eng0", "eng1", "eng2", "eng3"], broken)
    table = _table(graph, _ranked(winner="eng2", backup1="eng1", backup2="eng3"))
    choice = ConvGraphCache(tune=True, table=table)._choose_plan(graph, table, {})
    assert (choice.source, choice.rank, choice.name) == ("table", rank, name)
    described = choice.describe()
    assert f"experience table {rank}" in described
    for failed in broken:
        assert failed in choice.failures and failed in described
    if broken:
        assert "did not build" in described


def test_no_table_plan_builds_heuristics_without_timing(monkeypatch):
    from lazytensor.cbr import cudnn_cache

    monkeypatch.setattr(cudnn_cache, "fastest_plan", _never)
    graph = FakeGraph(["eng0", "eng1", "eng2", "eng3"], broken=("eng2", "eng1", "eng3"))
    table = _table(graph, _ranked(winner="eng2", backup1="eng1", backup2="eng3"))
    choice = cudnn_cache.ConvGraphCache(tune=True, table=table)._choose_plan(graph, table, {})
    assert (choice.source, choice.name) == ("heuristic", "eng0")
    assert "none of the experience table's plans (winner, backup1, backup2) builds here" in choice.describe()


@pytest.mark.parametrize("entry, problem", [
    ("not an object", "the entry is a str"),
    ({"rejected": 7}, "'rejected' reason is not a text"),
])
def test_an_unreadable_table_entry_is_reported_and_cudnn_heuristics_used(monkeypatch, entry, problem):
    from lazytensor.cbr import cudnn_cache
    from lazytensor.cbr.experience_table import ExperienceTableWarning

    monkeypatch.setattr(cudnn_cache, "fastest_plan", _never)
    monkeypatch.setattr(cudnn_cache, "_reported_entries", set())
    graph = FakeGraph(["eng0", "eng1"])
    table = _table(graph, entry, path=f"tables/{problem}.json")
    with pytest.warns(ExperienceTableWarning) as record:
        cudnn_cache._warn_unreadable(table, graph.kind, graph.key)
        cudnn_cache._warn_unreadable(table, graph.kind, graph.key)      # once per entry
    assert len(record) == 1
    assert f"tables/{problem}.json" in str(record[0].message) and problem in str(record[0].message)
    assert table.rejection(graph.kind, graph.key) is None
    choice = cudnn_cache.ConvGraphCache(tune=True, table=table)._choose_plan(graph, table, {})
    assert (choice.source, choice.name) == ("heuristic", "eng0")
    assert "cannot be read" in choice.describe() and f"tables/{problem}.json" in choice.describe()


def test_an_unreadable_rank_is_skipped(monkeypatch):
    from lazytensor.cbr import cudnn_cache
    from lazytensor.cbr.experience_table import ExperienceTableWarning

    monkeypatch.setattr(cudnn_cache, "_reported_entries", set())
    graph = FakeGraph(["eng0", "eng1", "eng2"])
    entry = _ranked(winner="eng2", backup1="eng1")
    entry["winner"] = {"index": 2}                  # no name
    table = _table(graph, entry)
    with pytest.warns(ExperienceTableWarning, match="its winner record has no plan name"):
        cudnn_cache._warn_unreadable(table, graph.kind, graph.key)
    choice = cudnn_cache.ConvGraphCache(tune=True, table=table)._choose_plan(graph, table, {})
    assert (choice.source, choice.rank, choice.name) == ("table", "backup1", "eng1")


@pytest.mark.parametrize("how", ["truncated", "emptied", "random bytes", "another format"])
def test_an_unreadable_table_file_is_left_out_with_one_warning(tmp_path, how):
    from lazytensor.cbr.experience_table import ExperienceTable, ExperienceTableWarning

    graph = FakeGraph(["eng0"])
    good = _table(graph, _ranked(winner="eng0"))
    good.gpu_name, good.cudnn_version = "NVIDIA H200", 91900
    good.save(tmp_path / "nvidia-h200__cudnn91900__a.json")
    bad = tmp_path / "nvidia-h200__cudnn91900__b.json"
    other = ExperienceTable("NVIDIA H200", 91900)
    other.record("conv", "n1_h1_w1_c1_k1_r1_s1_float16_st1x1_pad0x0_dil1x1", _ranked(winner="x"))
    other.save(bad)
    if how == "another format":
        bad.write_text(json.dumps({"format": 1, "gpu": "NVIDIA H200", "cudnn_version": 91900, "shapes": [1, 2]}))
    else:
        _damage(bad, how)
    with pytest.warns(ExperienceTableWarning) as record:
        merged = ExperienceTable.for_device("NVIDIA H200", 91900, tmp_path)
    assert len(record) == 1 and str(bad) in str(record[0].message)
    assert merged.plan_names(graph.kind, graph.key) == ["eng0"]              # the readable file still serves
    assert str(bad) in merged.unreadable
    assert merged.file_of(graph.key) == str(tmp_path / "nvidia-h200__cudnn91900__a.json")


def _never(*args, **kwargs):
    raise AssertionError("a shape the experience table lists was timed")


# -- an interrupt between the steps of a CBR training call ---------------------------------------------------

def _cbr_block():
    block = lt.cbr.CBR(4, 8, 3, padding=1, device="cpu", seed=3)
    rng = np.random.default_rng(0)
    block.running_mean = lt.asarray(rng.standard_normal(8).astype(np.float32))
    block.running_var = lt.asarray((rng.random(8) + 0.5).astype(np.float32))
    x = lt.asarray(rng.standard_normal((2, 6, 6, 4)).astype(np.float32))
    return block, x


def _state(block):
    return [t.numpy().copy() for t in (block.running_mean, block.running_var, block.weight, block.gamma, block.beta)]


def test_an_interrupt_between_cbr_steps_leaves_running_statistics_bit_identical(monkeypatch):
    from lazytensor.plan import steps as steps_module

    reference, x = _cbr_block()
    want_y = reference(x).numpy()
    want = _state(reference)                  # after one training call
    seen = []
    probe, _ = _cbr_block()
    monkeypatch.setattr(steps_module, "before_step", lambda i, step: seen.append(type(step).__name__))
    probe(x)
    assert seen[0] == "Conv2dStep" and seen[-1] == "CommitStep", seen   # running statistics: the last step
    for at in range(len(seen)):
        block, x = _cbr_block()
        before = _state(block)

        def interrupt(i, step, at=at):
            if i == at:
                raise KeyboardInterrupt

        monkeypatch.setattr(steps_module, "before_step", interrupt)
        with pytest.raises(KeyboardInterrupt):
            block(x)
        for got, was in zip(_state(block), before):
            assert got.tobytes() == was.tobytes(), f"interrupted before step {at} ({seen[at]})"
        monkeypatch.setattr(steps_module, "before_step", None)
        y = block(x)                          # the next call runs whole, as if nothing had happened
        np.testing.assert_array_equal(y.numpy(), want_y)
        for got, expected in zip(_state(block), want):
            assert got.tobytes() == expected.tobytes()


def _adamw(seed=5):
    from lazytensor.nn.optim import AdamW

    rng = np.random.default_rng(seed)
    params = [lt.asarray(rng.standard_normal(shape).astype(dtype)) for shape, dtype in
              (((3, 4), np.float32), ((5,), np.float32), ((2, 3), np.float16))]
    grads = [lt.asarray(rng.standard_normal(p.shape).astype(p.dtype)) for p in params]
    return AdamW(params, lr=0.01), params, grads


def _optimizer_state(opt, params):
    arrays = [p.numpy() for p in params] + [t.numpy() for t in (*opt.m, *opt.v)]
    arrays += [m.numpy() for m in opt.master if m is not None]
    return [a.copy() for a in arrays] + [opt.steps]


def test_ctrl_c_during_an_optimizer_step_arrives_after_every_parameter_is_updated(monkeypatch):
    """A real SIGINT at any step of any assignment in opt.step: the step completes, then the
    KeyboardInterrupt arrives; parameters, moments, master weights and the step count are all new."""
    import signal

    from lazytensor.plan import steps as steps_module

    reference, ref_params, grads = _adamw()
    reference.step(grads)
    want = _optimizer_state(reference, ref_params)
    count = []
    probe, probe_params, grads = _adamw()
    monkeypatch.setattr(steps_module, "before_step", lambda i, step: count.append(i))
    probe.step(grads)
    assert len(count) >= 3, count          # one kernel per parameter at least
    for at in range(len(count)):
        opt, params, grads = _adamw()
        seen = []

        def interrupt(i, step, at=at):
            seen.append(i)
            if len(seen) - 1 == at:
                signal.raise_signal(signal.SIGINT)

        monkeypatch.setattr(steps_module, "before_step", interrupt)
        with pytest.raises(KeyboardInterrupt):
            opt.step(grads)
        monkeypatch.setattr(steps_module, "before_step", None)
        got = _optimizer_state(opt, params)
        assert got[-1] == want[-1], f"interrupted at step {at}"
        for g, w in zip(got[:-1], want[:-1]):
            assert g.tobytes() == w.tobytes(), f"interrupted at step {at}"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# -- running out of GPU memory: the runner's logic, with a step that fails as CuPy's allocator does ---------

class OutOfMemoryError(MemoryError):
    """Stands for cupy.cuda.memory.OutOfMemoryError (matched by name, as CuPy may be absent)."""

    def __init__(self, size, total):
        super().__init__(f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes).")


def test_out_of_memory_in_a_step_is_retried_once_after_freeing(monkeypatch):
    from lazytensor.assign import evaluate as evaluate_module
    from lazytensor.plan import steps as steps_module

    block, x = _cbr_block()
    reference, _ = _cbr_block()
    want_y = reference(x).numpy()
    want = _state(reference)
    freed = []
    monkeypatch.setattr(evaluate_module, "release_all", lambda: freed.append("graphs"))
    failures = iter([OutOfMemoryError(1 << 20, 5 << 20)])

    def fail_once(i, step):
        if type(step).__name__ == "FinalizeStep":
            error = next(failures, None)
            if error is not None:
                raise error

    monkeypatch.setattr(steps_module, "before_step", fail_once)
    y = block(x)
    assert freed == ["graphs"]
    np.testing.assert_array_equal(y.numpy(), want_y)
    for got, expected in zip(_state(block), want):
        assert got.tobytes() == expected.tobytes()


def test_out_of_memory_that_persists_names_the_step_and_leaves_everything_as_it_was(monkeypatch):
    from lazytensor.kernels.cuda.device_memory import DeviceOutOfMemory
    from lazytensor.assign import evaluate as evaluate_module
    from lazytensor.plan import steps as steps_module

    block, x = _cbr_block()
    before = _state(block)
    freed = []
    monkeypatch.setattr(evaluate_module, "release_all", lambda: freed.append("graphs"))

    def always(i, step):
        if type(step).__name__ == "FusedElementwise":
            raise OutOfMemoryError(3 << 20, 7 << 20)

    out = lt.full((2, 6, 6, 8), -1.0, np.float32)
    monkeypatch.setattr(steps_module, "before_step", always)
    with pytest.raises(DeviceOutOfMemory) as info:
        out[...] = block.expression(x)
    message = str(info.value)
    assert info.value.nbytes == 3 << 20 and "3,145,728 bytes (3.0 MiB)" in message
    assert "FusedElementwise" in message and "in step" in message
    assert "tried once more" in message and "Nothing was written" in message
    assert info.value.untouched and info.value.retried and freed == ["graphs"]
    assert isinstance(info.value.__cause__, OutOfMemoryError)
    np.testing.assert_array_equal(out.numpy(), np.full((2, 6, 6, 8), -1.0, np.float32))
    for got, was in zip(_state(block), before):
        assert got.tobytes() == was.tobytes()
    monkeypatch.setattr(steps_module, "before_step", None)
    out[...] = block.expression(x)          # memory is back: the next call works
    reference, _ = _cbr_block()
    np.testing.assert_array_equal(out.numpy(), reference(x).numpy())
    for got, expected in zip(_state(block), _state(reference)):
        assert got.tobytes() == expected.tobytes()


def test_a_host_memory_error_is_not_taken_for_the_gpus(monkeypatch):
    from lazytensor.assign import evaluate as evaluate_module
    from lazytensor.plan import steps as steps_module

    monkeypatch.setattr(evaluate_module, "release_all", _never)

    def host(i, step):
        raise MemoryError("numpy could not allocate")

    monkeypatch.setattr(steps_module, "before_step", host)
    with pytest.raises(MemoryError, match="numpy could not allocate"):
        lt.evaluate(lt.asarray(np.ones(3)) + 1)


# -- the CUDA side's logic, without a GPU: the cubin cache and the out-of-memory translation ---------------

def _compiler(monkeypatch):
    from lazytensor.kernels.cuda.compile import CubinCompiler

    compiler = object.__new__(CubinCompiler)
    compiler.nvrtc_version, compiler.arch = (13, 0), 90
    compiled = []
    monkeypatch.setattr(compiler, "compile", lambda source, options: compiled.append(1) or b"\x7fELF cubin " * 40,
                        raising=False)
    return compiler, compiled


@pytest.mark.parametrize("how", ["truncated", "emptied", "random bytes"])
def test_a_damaged_cubin_file_is_compiled_again_with_one_warning(tmp_path, monkeypatch, how):
    from lazytensor.kernels.cuda.render_cuda import CudaSource

    monkeypatch.setenv("LAZYTENSOR_CACHE_DIR", str(tmp_path))
    source = CudaSource("lt_kernel", "extern \"C\" __global__ void lt_kernel() {}", False, "")
    compiler, compiled = _compiler(monkeypatch)
    data, path, how_obtained, _ = compiler.cubin(source)
    assert how_obtained == "compiled" and path.exists() and path.read_bytes() != data    # sealed with a checksum
    assert compiler.cubin(source)[0] == data and compiler.cubin(source)[2] == "disk"
    _damage(path, how)
    with pytest.warns(CacheWarning) as record:
        again, _, how_obtained, _ = compiler.cubin(source)
    assert (again, how_obtained) == (data, "compiled") and len(compiled) == 2
    assert len(record) == 1 and str(path) in str(record[0].message)
    assert compiler.cubin(source)[2] == "disk"
    assert [p.name for p in path.parent.iterdir()] == [path.name]                      # no temporary left


def test_cubins_without_a_usable_cache_folder(tmp_path, monkeypatch):
    from lazytensor.kernels.cuda.render_cuda import CudaSource

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("LAZYTENSOR_CACHE_DIR", str(blocker))
    compiler, compiled = _compiler(monkeypatch)
    source = CudaSource("lt_kernel", "extern \"C\" __global__ void lt_kernel() {}", False, "")
    with pytest.warns(CacheWarning, match="is a file, not a folder"):
        data, path, how_obtained, _ = compiler.cubin(source)
    assert path is None and how_obtained == "compiled"
    assert compiler.cubin(source)[2] == "compiled" and len(compiled) == 2


def test_a_cuda_allocation_failure_says_what_and_how_much():
    from types import SimpleNamespace

    from lazytensor.kernels.cuda.backend import CudaBackend
    from lazytensor.kernels.cuda.device_memory import DeviceOutOfMemory

    def empty(shape, dtype):
        raise OutOfMemoryError(2 * 3 * 4 * 2, 1 << 30)

    backend = object.__new__(CudaBackend)
    backend._cupy = SimpleNamespace(empty=empty)
    with pytest.raises(DeviceOutOfMemory) as info:
        backend.empty((2, 3, 4), np.float16)
    assert info.value.nbytes == 48 and "an array of shape (2, 3, 4) float16" in str(info.value)
    assert isinstance(info.value.__cause__, OutOfMemoryError)


def test_a_cudnn_workspace_failure_keeps_its_words():
    from lazytensor.cbr.cudnn_errors import CudnnOutOfMemory
    from lazytensor.kernels.cuda.device_memory import as_out_of_memory, is_out_of_memory

    cause = OutOfMemoryError(1 << 22, 0)
    error = CudnnOutOfMemory("the cuDNN workspace of plan eng0 for the conv graph of k", 1 << 22, cause)
    assert is_out_of_memory(error) and not is_out_of_memory(MemoryError("host"))
    translated = as_out_of_memory(error, "the step's own use")
    assert translated.what.startswith("the cuDNN workspace") and translated.nbytes == 1 << 22
    assert "4,194,304 bytes (4.0 MiB) for the cuDNN workspace of plan eng0" in str(translated)


def test_out_of_memory_in_several_results_is_retried_once_and_writes_once(monkeypatch):
    """lt.assign of a swap: a retry after the failure must not swap twice."""
    from lazytensor.assign import evaluate as evaluate_module
    from lazytensor.plan import steps as steps_module

    a0, b0 = np.arange(6, dtype=np.float32), -np.arange(6, dtype=np.float32)
    a, b = lt.asarray(a0.copy()), lt.asarray(b0.copy())
    freed = []
    monkeypatch.setattr(evaluate_module, "release_all", lambda: freed.append(1))
    failures = iter([OutOfMemoryError(24, 0)])

    def fail_once(i, step):
        error = next(failures, None)
        if error is not None:
            raise error

    monkeypatch.setattr(steps_module, "before_step", fail_once)
    lt.assign([(a, b * 2), (b, a + 1)])
    assert freed == [1]
    np.testing.assert_array_equal(a.numpy(), b0 * 2)
    np.testing.assert_array_equal(b.numpy(), a0 + 1)
