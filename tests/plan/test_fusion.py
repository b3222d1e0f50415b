"""One kernel per assignment, shared subexpressions computed once, scalars as kernel arguments,
the kernel cache in memory and on disk (reused by a new process, rebuilt when damaged), and
evaluation from several threads at once."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.plan.lower import lower


def _rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# -- one kernel per assignment ---------------------------------------------------------------------

@pytest.mark.compiled_tier
def test_issue_example_is_one_kernel_per_assignment():
    an, bn, cn, dn = (_rand((1000, 64), seed=s) for s in range(4))
    a, b, c, d = (lt.asarray(x) for x in (an, bn, cn, dn))
    e = lt.relu((a + b) * c + 5 * d)
    y = lt.empty_like(a)
    with lt.profile() as p:
        y[...] = e
    assert len(p.kernels) == 1
    k = p.kernels[0]
    assert k.backend == "cpu" and k.kind == "elementwise" and k.elements == 64000
    assert k.cache in ("memory", "disk", "compiled") and k.compile_seconds >= 0
    np.testing.assert_array_equal(y.numpy(), np.maximum((an + bn) * cn + 5 * dn, 0))
    with lt.profile() as p:
        y += a * 2
    assert len(p.kernels) == 1
    with lt.profile() as p:
        z = lt.evaluate(e)
    assert len(p.kernels) == 1
    np.testing.assert_array_equal(z.numpy(), np.maximum((an + bn) * cn + 5 * dn, 0))


@pytest.mark.parametrize("depth", [1, 10, 50])
def test_deep_chain_is_one_launch(depth):
    an, bn = _rand((7, 13), np.float64), _rand((13,), np.float64, seed=1)
    a, b = lt.asarray(an), lt.asarray(bn)
    e, want = a, an
    for i in range(depth):
        if i % 3 == 0:
            e, want = e * 0.5 + b, want * 0.5 + bn
        elif i % 3 == 1:
            e, want = lt.maximum(e, -b), np.maximum(want, -bn)
        else:
            e, want = e - a * 0.25, want - an * 0.25
    assert lt.explain(e).count("FusedElementwise") == 1
    with lt.profile() as p:
        got = lt.evaluate(e)
    assert len(p.kernels) == 1, p
    np.testing.assert_array_equal(got.numpy(), want)


def test_explain_prints_the_plan_that_runs():
    a = lt.asarray(_rand((4, 5)))
    text = lt.explain(lt.sqrt(a * a) + 1)
    assert "plan: 1 step" in text and "FusedElementwise" in text
    assert "def kernel" in text                    # the generated source is shown
    assert "sqrt" in text


# -- shared subexpressions -------------------------------------------------------------------------

def test_shared_subexpression_is_computed_once_per_element():
    an = _rand((6, 7), np.float64)
    a = lt.asarray(an)
    s = lt.exp(a * 0.5)                           # one Expr object, used three times
    e = s * s + s - lt.sin(s)
    program, inputs, scalars = lower(e, e.dtype)
    ops = [ins[0] for ins in program.instrs]
    assert ops.count("exp") == 1, ops
    assert ops.count("sin") == 1
    assert program.n_inputs == 1 and len(inputs) == 1    # `a` is one kernel argument
    # The same holds in the source that explain shows: exp appears once in each loop body (one per
    # kernel variant; kernel_stream has two, its blocks' and its edges'), each starting at v0.
    text = str(lt.explain(e))
    bodies = text.count("v0 = ")
    assert bodies >= text.count("def kernel") and text.count("np.exp(") == bodies
    with lt.profile() as p:
        got = lt.evaluate(e).numpy()
    assert len(p.kernels) == 1
    sn = np.exp(an * 0.5)
    np.testing.assert_allclose(got, sn * sn + sn - np.sin(sn), rtol=1e-14)


def test_equal_but_distinct_subexpressions_and_repeated_tensor():
    """Two separately built (equal) subexpressions are two values; a tensor read twice is one input."""
    a = lt.asarray(_rand((3, 3)))
    e = lt.tanh(a) + lt.tanh(a)
    program, inputs, _ = lower(e, e.dtype)
    assert [ins[0] for ins in program.instrs].count("tanh") == 2
    assert len(inputs) == 1


# -- scalars are kernel arguments ----------------------------------------------------------------

@pytest.mark.compiled_tier
def test_scalar_values_share_one_compiled_kernel():
    an = _rand((5, 3), np.float64, seed=9)
    a = lt.asarray(an)
    with lt.profile() as p:
        r1 = lt.evaluate(lt.cos(a) * 2.0 - a)
        r2 = lt.evaluate(lt.cos(a) * 3.0 - a)
        r3 = lt.evaluate(lt.cos(a) * -1e300 - a)
    assert len(p.kernels) == 3
    assert len({k.name for k in p.kernels}) == 1, p
    assert [k.cache for k in p.kernels[1:]] == ["memory", "memory"]
    assert all(k.compile_seconds == 0 for k in p.kernels[1:])
    np.testing.assert_allclose(r1.numpy(), np.cos(an) * 2.0 - an, rtol=1e-14)
    np.testing.assert_allclose(r2.numpy(), np.cos(an) * 3.0 - an, rtol=1e-14)
    np.testing.assert_allclose(r3.numpy(), np.cos(an) * -1e300 - an, rtol=1e-14)
    source = lt.explain(lt.cos(a) * -1e300 - a).split("def kernel", 1)[1]
    assert "1e+300" not in source and "1e300" not in source            # not a source constant


# -- disk cache: a second process, damaged entries ------------------------------------------------

_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import lazytensor as lt
    a = lt.asarray(np.arange(12, dtype=np.float64).reshape(3, 4))
    b = lt.asarray(np.linspace(-1, 1, 4))
    with lt.profile() as p:
        y = lt.evaluate(lt.tanh(a * 0.125 - b) * 2.5 + lt.log1p(a))
    want = np.tanh(np.arange(12.0).reshape(3, 4) * 0.125 - np.linspace(-1, 1, 4)) * 2.5 + np.log1p(np.arange(12.0).reshape(3, 4))
    ok = bool(np.allclose(y.numpy(), want, rtol=1e-13))
    print(json.dumps({"cache": [k.cache for k in p.kernels], "ok": ok}))
""")


def _child(cache: Path) -> dict:
    env = dict(os.environ, LAZYTENSOR_CACHE_DIR=str(cache), LAZYTENSOR_DEVICE="cpu")
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"child process failed:\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.compiled_tier
def test_disk_cache_is_reused_by_a_new_process(tmp_path):
    first = _child(tmp_path)
    assert first == {"cache": ["compiled"], "ok": True}
    assert list((tmp_path / "cpu").glob("lt_*.py"))
    second = _child(tmp_path)
    assert second == {"cache": ["disk"], "ok": True}


@pytest.mark.compiled_tier
def test_corrupt_cache_entries_are_rebuilt(tmp_path):
    assert _child(tmp_path)["cache"] == ["compiled"]
    pycache = tmp_path / "cpu" / "__pycache__"
    index = list(pycache.glob("*.nbi"))
    data = list(pycache.glob("*.nbc"))
    assert index and data, sorted(p.name for p in pycache.iterdir())
    for f in data:
        f.write_bytes(b"\x00garbage" * 7)
    assert _child(tmp_path) == {"cache": ["compiled"], "ok": True}    # garbled numba data: rebuilt
    for f in pycache.glob("*.nbi"):
        f.write_bytes(f.read_bytes()[: max(1, f.stat().st_size // 3)] + b"\xff\xfe")
    assert _child(tmp_path) == {"cache": ["compiled"], "ok": True}    # garbled numba index: rebuilt
    for f in (tmp_path / "cpu").glob("lt_*.py"):
        f.write_text(f.read_text()[:40])           # a truncated generated module
    # The module is rewritten with the same text; numba's stamps are content hashes, so the
    # compiled code (still valid for that text) may be served from disk again.
    third = _child(tmp_path)
    assert third["ok"] and third["cache"] in (["disk"], ["compiled"])
    for f in (tmp_path / "cpu").glob("lt_*.py"):
        f.write_text(f.read_text()[:40])           # truncated module and garbled data at once
    for f in pycache.glob("*.nb*"):
        f.write_bytes(b"")
    assert _child(tmp_path) == {"cache": ["compiled"], "ok": True}
    assert _child(tmp_path) == {"cache": ["disk"], "ok": True}    # and the rebuilt entry serves again


# -- threads ---------------------------------------------------------------------------------------

def test_threads_evaluating_same_and_new_expressions():
    an = _rand((9, 11), np.float64, seed=3)
    bn = _rand((11,), np.float64, seed=4)
    a, b = lt.asarray(an), lt.asarray(bn)
    barrier = threading.Barrier(6)

    def job(i):
        barrier.wait(timeout=60) if i < 6 else None
        k = i % 3                       # three structures, each new to this process, raced by many threads
        if k == 0:
            e, want = lt.sigmoid(a * (i + 1.0)) - b, 1 / (1 + np.exp(-(an * (i + 1.0)))) - bn
        elif k == 1:
            e, want = lt.where(a > b, a ** 2, -b) + i, np.where(an > bn, an ** 2, -bn) + i
        else:
            e, want = lt.floor(a * 3.0) % 2.0 + lt.ceil(b), np.floor(an * 3.0) % 2.0 + np.ceil(bn)
        y = lt.empty((9, 11), np.float64)
        y[...] = e
        return y.numpy(), want

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(job, range(18)))
    for got, want in results:
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)
