"""Faults on CUDA: a damaged cubin in the disk cache, running out of GPU memory in a plan's
temporaries, in a cuDNN workspace and in a graph capture, and an experience table that cannot be
read or whose plans do not build. GPU only (the CPU side of each is in assign/test_faults.py)."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import lazytensor as lt
from tests.support.devices import cudnn_ready
from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]
needs_cudnn = pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and cuDNN")

from lazytensor.kernels.cuda.device_memory import DeviceOutOfMemory  # noqa: E402

# -- a damaged cubin ------------------------------------------------------------------------------------

_CHILD = textwrap.dedent('''
    import json, warnings
    import numpy as np
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import lazytensor as lt
        from lazytensor.kernels.cache import CacheWarning
        a = np.linspace(0, 9, 1000, dtype=np.float32)
        x = lt.asarray(a, device="cuda")
        y = lt.empty((1000,), np.float32, device="cuda")
        with lt.profile() as p:
            y[...] = lt.sqrt(x * 0.5 + 0.25) - x / 7
        ok = bool(np.allclose(y.numpy(), np.sqrt(a * 0.5 + 0.25) - a / 7, rtol=1e-6))
    print(json.dumps({"ok": ok, "cache": p.kernels[0].cache,
                      "warnings": [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]}))
''')


def _child(cache) -> dict:
    env = dict(os.environ, LAZYTENSOR_CACHE_DIR=str(cache))
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("how", ["truncated", "emptied", "random bytes"])
def test_a_damaged_cubin_is_rebuilt_with_one_warning_naming_it(tmp_path, how):
    assert _child(tmp_path) == {"ok": True, "cache": "compiled", "warnings": []}
    (cubin,) = (tmp_path / "cuda").glob("*.cubin")
    data = cubin.read_bytes()
    cubin.write_bytes({"truncated": data[: len(data) // 2], "emptied": b"",
                       "random bytes": random.Random(1).randbytes(len(data))}[how])
    got = _child(tmp_path)
    assert got["ok"] and got["cache"] == "compiled", got
    assert len(got["warnings"]) == 1 and str(cubin) in got["warnings"][0], got["warnings"]
    assert _child(tmp_path) == {"ok": True, "cache": "disk", "warnings": []}       # replaced: served again


# -- out of GPU memory ----------------------------------------------------------------------------------

def _operands(rng, n=2, h=6, w=5, c=8, k=16):
    x = rng.standard_normal((n, h, w, c)).astype(np.float16)
    wt = (rng.standard_normal((k, 3, 3, c)) / np.sqrt(9 * c)).astype(np.float16)
    gamma = (1 + 0.1 * rng.standard_normal(k)).astype(np.float32)
    beta = (0.1 * rng.standard_normal(k)).astype(np.float32)
    return x, wt, gamma, beta


class Loop:
    """A CBR training step assigned into the same destination on every call (as test_replay's)."""

    def __init__(self, ops):
        x, wt, gamma, beta = ops
        k = wt.shape[0]
        self.x = lt.asarray(x, device="cuda")
        self.w, self.gamma, self.beta = (lt.asarray(v, device="cuda") for v in (wt, gamma, beta))
        self.rm = lt.asarray(np.linspace(-0.1, 0.1, k).astype(np.float32), device="cuda")
        self.rv = lt.asarray(np.linspace(0.5, 1.5, k).astype(np.float32), device="cuda")
        self.y = lt.full(x.shape[:3] + (k,), -7.0, np.float16, "cuda")
        self.saved = lt.BatchNormSaved()

    def expression(self):
        return lt.relu(lt.batch_norm(lt.conv2d(self.x, self.w, padding=1), self.gamma, self.beta, self.rm,
                                     self.rv, training=True, saved=self.saved))

    def call(self):
        self.y[...] = self.expression()

    def state(self):
        return {name: getattr(self, name).numpy() for name in ("x", "w", "gamma", "beta", "rm", "rv", "y")}


class FailingAllocator:
    """CuPy's allocator, failing as a full GPU does while `armed` (only once per arming if `once`)."""

    def __init__(self, once=False):
        import cupy
        self.cupy = cupy
        self.pool = cupy.get_default_memory_pool()
        self.armed, self.once = False, once
        self.failed = 0

    def __call__(self, size):
        if self.armed:
            self.failed += 1
            self.armed = not self.once
            raise self.cupy.cuda.memory.OutOfMemoryError(size, self.pool.total_bytes())
        return self.pool.malloc(size)


def _assert_state(got, want):
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@needs_cudnn
def test_out_of_memory_for_a_plans_temporaries(monkeypatch):
    import cupy
    from lazytensor.assign import evaluate as evaluate_module

    monkeypatch.setenv("LAZYTENSOR_CBR_TUNE", "0")
    released = []
    real_release = evaluate_module.release_all
    monkeypatch.setattr(evaluate_module, "release_all", lambda: (released.append(1), real_release()))
    ops = _operands(np.random.default_rng(11), h=5, w=7)        # shapes of their own: recipes not shared
    reference, loop = Loop(ops), Loop(ops)
    reference.call()
    reference.call()
    loop.call()                                 # planned; the next call takes fresh temporaries
    before = loop.state()
    allocator = FailingAllocator()
    with cupy.cuda.using_allocator(allocator):
        allocator.armed = True
        with pytest.raises(DeviceOutOfMemory) as info:
            loop.call()
        allocator.armed = False
    message = str(info.value)
    assert allocator.failed >= 2 and released == [1]        # the graphs' memory released, then tried once more
    assert "out of GPU memory allocating" in message and "bytes" in message and "an array of shape" in message
    assert "Nothing was written" in message and info.value.untouched and info.value.retried
    _assert_state(loop.state(), before)     # inputs, destination and running statistics as they were
    loop.call()                             # memory is back: the call works, as if it had never failed
    _assert_state(loop.state(), reference.state())


@needs_cudnn
def test_out_of_memory_for_a_cudnn_workspace(monkeypatch):
    import cupy
    from lazytensor.cbr.cudnn_cache import ConvGraphCache

    monkeypatch.setenv("LAZYTENSOR_CBR_TUNE", "0")
    allocator = FailingAllocator(once=True)     # the workspace fails; the retry's temporaries do not
    real_choose = ConvGraphCache._choose_plan

    sizes = []

    def choose_then_fail(self, graph, table, pointers):
        plan = real_choose(self, graph, table, pointers)
        # a workspace to allocate, whatever the plan, and larger than the one its kind's graphs share
        # already (earlier tests may have grown it: a request it covers would allocate nothing)
        held = max((w.nbytes for w in self._workspaces.values()), default=0)
        plan.workspace_bytes = max(plan.workspace_bytes, 4096, held + 4096)
        sizes.append(plan.workspace_bytes)
        allocator.armed = True                                     # ... and no memory for it
        return plan

    ops = _operands(np.random.default_rng(12), h=7, w=9, c=16, k=24)     # a shape no other test builds
    loop = Loop(ops)
    before = loop.state()
    monkeypatch.setattr(ConvGraphCache, "_choose_plan", choose_then_fail)
    with cupy.cuda.using_allocator(allocator):
        with pytest.raises(DeviceOutOfMemory) as info:
            loop.call()
        allocator.armed = False
    assert allocator.failed == 2                # the first try and the retry, each at the workspace
    message = str(info.value)
    assert "cuDNN workspace of plan" in message and f"{sizes[-1]:,} bytes" in message, message
    assert "in step 1 of" in message and "Nothing was written" in message and info.value.retried
    _assert_state(loop.state(), before)
    monkeypatch.setattr(ConvGraphCache, "_choose_plan", real_choose)
    loop.call()
    reference = Loop(ops)
    reference.call()
    _assert_state(loop.state(), reference.state())


@needs_cudnn
def test_out_of_memory_in_a_graph_capture_runs_the_steps(monkeypatch):
    import cupy
    from lazytensor.kernels.backend import backend_for

    backend = backend_for("cuda")
    captures = []

    def capture_out_of_memory(run):
        captures.append(1)
        raise cupy.cuda.memory.OutOfMemoryError(1 << 30, 0)

    ops = _operands(np.random.default_rng(13), h=6, w=6)
    reference, loop = Loop(ops), Loop(ops)
    for _ in range(3):
        reference.call()
    monkeypatch.setattr(backend, "capture", capture_out_of_memory)
    for _ in range(3):
        loop.call()                          # the second call would capture: it runs step by step instead
    assert captures
    _assert_state(loop.state(), reference.state())


# -- experience tables ------------------------------------------------------------------------------------

def _conv_case(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 8, 8, 16)).astype(np.float16)
    w = (rng.standard_normal((16, 3, 3, 16)) / 12).astype(np.float16)
    return x, w


def _reference(x, w):
    from lazytensor.cbr.conv_cpu import conv2d_nhwc
    return conv2d_nhwc(x.astype(np.float32), w.astype(np.float32), 1, 1)


def _close(got, want):
    scale = float(np.abs(want).max()) or 1.0
    assert float(np.abs(got.astype(np.float32) - want).max()) <= 2e-3 * scale + 1e-3


@needs_cudnn
def test_unreadable_table_files_and_entries_fall_back(tmp_path, monkeypatch):
    import cupy
    from lazytensor.cbr.conv_key import ConvKey
    from lazytensor.cbr.cudnn_cache import ConvGraphCache, device_identity
    from lazytensor.cbr.cudnn_conv import conv2d
    from lazytensor.cbr.cudnn_graphs import GraphKind
    from lazytensor.cbr.experience_table import ExperienceTable, ExperienceTableWarning, device_slug

    x, w = _conv_case(21)
    key = ConvKey.of(x.shape, w.shape, "float16", 1, 1, 1)
    device = cupy.cuda.Device().id
    gpu, version = device_identity(device)
    table = ExperienceTable(gpu, version)
    table.record(GraphKind.CONV, key, {"winner": {"index": 3}, "backup1": "not an object"})    # no readable plan
    table.save(tmp_path / f"{device_slug(gpu, version)}__good.json")
    broken = tmp_path / f"{device_slug(gpu, version)}__broken.json"
    broken.write_text('{"format": 1, "gpu": "cut sho')
    monkeypatch.setenv("LAZYTENSOR_CBR_TABLES", str(tmp_path))
    monkeypatch.setenv("LAZYTENSOR_CBR_TUNE", "1")
    cache = ConvGraphCache(table="auto")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = conv2d(cupy.asarray(x), cupy.asarray(w), 1, 1, cache=cache)
    _close(cupy.asnumpy(y), _reference(x, w))
    messages = [str(m.message) for m in caught if issubclass(m.category, ExperienceTableWarning)]
    assert len(messages) == 2, messages
    assert any(str(broken) in m for m in messages)
    assert any("__good.json" in m and "winner, backup1" in m for m in messages)
    plan = cache.entry(GraphKind.CONV, key, device).plan
    assert plan.source == "heuristic" and not plan.timings          # a listed shape is never timed
    assert "none of the experience table's plans" in plan.describe()


@needs_cudnn
def test_a_table_winner_that_does_not_build_falls_back_to_backup1(monkeypatch):
    import cupy
    from lazytensor.cbr.conv_key import ConvKey
    from lazytensor.cbr.cudnn_cache import ConvGraphCache
    from lazytensor.cbr.cudnn_conv import conv2d
    from lazytensor.cbr.cudnn_graphs import GraphKind
    from lazytensor.cbr.experience_table import ExperienceTable

    x, w = _conv_case(22)
    xd, wd = cupy.asarray(x), cupy.asarray(w)
    key = ConvKey.of(x.shape, w.shape, "float16", 1, 1, 1)
    probe = ConvGraphCache(tune=False, table=None)
    conv2d(xd, wd, 1, 1, cache=probe)
    real = probe.entry(GraphKind.CONV, key, xd.device.id).plan.name
    table = ExperienceTable("test gpu", 1)
    table.record(GraphKind.CONV, key, {"winner": {"name": "a plan of another cuDNN", "index": 0},
                                       "backup1": {"name": real, "index": 0}})
    cache = ConvGraphCache(tune=True, table=table)
    y = conv2d(xd, wd, 1, 1, cache=cache)
    compiled = cache.entry(GraphKind.CONV, key, xd.device.id)
    assert (compiled.plan.source, compiled.plan.rank, compiled.plan.name) == ("table", "backup1", real)
    assert "experience table backup1" in compiled.describe() and "winner did not build" in compiled.describe()
    _close(cupy.asnumpy(y), _reference(x, w))
