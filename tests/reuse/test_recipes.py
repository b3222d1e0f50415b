"""Plan recipes: a heavy expression planned once per structure and rebound to new arrays gives the
same results as planning afresh, never shares temporaries between calls, and is not used where the
destination shares memory with an input."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from tests.support.devices import cudnn_ready
from lazytensor.plan import planner as lt_plan
from lazytensor.reuse import recipes

F32 = np.float32


GPU = [pytest.mark.gpu, pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")]
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=GPU)]
# (device, storage dtype, in-channels): the CUDA CBR path takes float16 and channels in multiples of 8
CBR_CONFIGS = [pytest.param("cpu", np.float32, 3, id="cpu"),
               pytest.param("cuda", np.float16, 8, id="cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
                   not cudnn_ready(), reason="needs CUDA, CuPy and cuDNN")])]


def arr(shape, seed, dtype=F32):
    return (np.random.default_rng(seed).standard_normal(shape) + 0.25).astype(dtype)


@pytest.fixture(autouse=True)
def fresh_recipes():
    recipes.clear()
    yield
    recipes.clear()


def count_builds(monkeypatch, op):
    calls = []

    def counting(*args):
        calls.append(1)
        return None                 # declines: the op's own builders follow
    monkeypatch.setitem(lt_plan.HEAVY, op, (counting, *lt_plan.HEAVY[op]))
    return calls


HEAVY_EXPRESSIONS = {
    "x - mean(x, axis=0)": (lambda a, b: a - a.mean(axis=0), lambda a, b: a - a.mean(axis=0)),
    "(a - b)**2 .sum(axis=1) * 0.5": (lambda a, b: ((a - b) ** 2).sum(axis=1) * 0.5,
                                      lambda a, b: ((a - b) ** 2).sum(axis=1) * F32(0.5)),
    "var over rows / max": (lambda a, b: lt.var(a, axis=0) / lt.max(b), lambda a, b: np.var(a, axis=0) / np.max(b)),
    "reshape of a transposed sum": (lambda a, b: (a.T + b.T).reshape(-1).sum(),
                                    lambda a, b: (a.T + b.T).reshape(-1).sum()),
    "std keepdims, broadcast": (lambda a, b: (a - b.mean(axis=1, keepdims=True)) / (lt.std(a) + 1),
                                lambda a, b: (a - b.mean(axis=1, keepdims=True)) / (np.std(a) + 1)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(HEAVY_EXPRESSIONS))
@given(shape=st.tuples(st.integers(1, 9), st.integers(1, 9)), seed=st.integers(0, 2**16))
@settings(max_examples=15, deadline=None)
def test_rebound_plans_match_numpy_on_new_inputs(device, name, shape, seed):
    build, oracle = HEAVY_EXPRESSIONS[name]
    for k in range(3):          # the second and third evaluations use the recipe of the first
        a_np, b_np = arr(shape, seed + 2 * k), arr(shape, seed + 2 * k + 1)
        got = lt.evaluate(build(lt.asarray(a_np, device=device), lt.asarray(b_np, device=device))).numpy()
        want = np.asarray(oracle(a_np, b_np), dtype=got.dtype)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_one_plan_per_structure(monkeypatch):
    calls = count_builds(monkeypatch, "reduce")
    for seed in range(4):
        x = lt.asarray(arr((6, 5), seed))
        lt.evaluate(x - x.mean(axis=0))
    assert len(calls) == 1 and recipes.count() == 1
    x = lt.asarray(arr((7, 5), 9))              # another shape: another plan
    lt.evaluate(x - x.mean(axis=0))
    assert len(calls) == 2 and recipes.count() == 2
    x = lt.asarray(arr((6, 5), 9))
    lt.evaluate(x - x.mean(axis=0) * 2.0)       # another scalar: another plan
    assert len(calls) == 3


def test_nan_scalars_and_strided_inputs_key_correctly():
    base = arr((8, 6), 0)
    for k in range(2):
        x = lt.asarray(base + k)
        got = lt.evaluate(lt.where(x > 0, x, np.nan) - lt.max(x)).numpy()
        np.testing.assert_array_equal(got, np.where(base + k > 0, base + k, np.nan) - np.max(base + k))
    # the same structure over a strided view must not take the contiguous input's recipe
    x = lt.asarray(base)
    np.testing.assert_allclose(lt.evaluate(x[:, ::2] - x[:, ::2].mean(axis=0)).numpy(),
                               base[:, ::2] - base[:, ::2].mean(axis=0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lt.evaluate(x[:4, :3] - x[:4, :3].mean(axis=0)).numpy(),
                               base[:4, :3] - base[:4, :3].mean(axis=0), rtol=1e-6, atol=1e-6)


def test_a_destination_that_is_also_read_is_planned_every_time(monkeypatch):
    calls = count_builds(monkeypatch, "reduce")
    a_np = arr((5, 4), 3)
    a = lt.asarray(a_np.copy())
    for _ in range(2):
        a[...] = a - a.mean(axis=0) + a.T.sum(axis=1).reshape(1, -1)[:, :4] * 0 + 1
        a_np = a_np - a_np.mean(axis=0) + 1
        np.testing.assert_allclose(a.numpy(), a_np, rtol=1e-5, atol=1e-5)
    assert len(calls) == 4 and recipes.count() == 0


def test_a_plan_holding_a_view_beyond_its_input_is_made_each_time_without_retrying(monkeypatch):
    from lazytensor.plan.elementwise import copy_step
    made, tried = [], []
    real = recipes.Recipe

    def counting(*args):
        tried.append(1)
        return real(*args)
    monkeypatch.setattr(recipes, "Recipe", counting)
    base = arr((8, 4), 0)
    x = lt.asarray(base[2:])                   # a tensor over part of an allocation
    root = x.sum(axis=0)

    def make_plan(root, out, backend):         # a plan reading a view of that allocation outside x
        made.append(1)
        return [copy_step(backend, base[0], out, "a row before x")]
    for _ in range(3):
        out = np.empty(4, F32)
        for step in recipes.planned(root, out, x.backend, make_plan):
            step.run()
        np.testing.assert_array_equal(out, base[0])
    assert len(made) == 3 and len(tried) == 1 and recipes.count() == 0


def test_a_view_inside_an_input_is_rebound_inside_the_new_input():
    from lazytensor.plan.elementwise import copy_step
    made = []

    def make_plan(root, out, backend):         # a plan reading a view it made inside its input
        made.append(1)
        return [copy_step(backend, root.args[0].data[1], out, "second row")]
    for seed in range(3):
        x = lt.asarray(arr((6, 4), seed))
        out = np.empty(4, F32)
        for step in recipes.planned(x.sum(axis=0), out, x.backend, make_plan):
            step.run()
        np.testing.assert_array_equal(out, x.numpy()[1])
    assert len(made) == 1


@pytest.mark.parametrize("device, dtype, c", CBR_CONFIGS)
def test_cbr_training_results_are_fresh_each_call(device, dtype, c):
    x1 = lt.asarray(arr((2, 6, 6, c), 1, dtype), device=device)
    x2 = lt.asarray(arr((2, 6, 6, c), 2, dtype), device=device)
    block = lt.cbr.CBR(c, 8, 3, padding=1, dtype=dtype, device=device)
    y1 = block(x1)
    first = block.saved
    mean1, mask1 = first.saved_mean.numpy().copy(), first.relu_mask.numpy().copy()
    y1_copy = y1.numpy().copy()
    rm1 = block.running_mean.numpy().copy()
    y2 = block(x2)                                   # rebound plan: new temporaries, new holder
    second = block.saved
    assert recipes.count() == 1
    assert second is not first and second.saved_mean.data is not first.saved_mean.data
    np.testing.assert_array_equal(first.saved_mean.numpy(), mean1)        # not overwritten
    np.testing.assert_array_equal(first.relu_mask.numpy(), mask1)
    np.testing.assert_array_equal(y1.numpy(), y1_copy)
    assert not np.array_equal(block.running_mean.numpy(), rm1)            # updated in place again
    # the rebound call equals calls planned afresh
    fresh = lt.cbr.CBR(c, 8, 3, padding=1, dtype=dtype, device=device)
    for x in (x1, x2):
        recipes.clear()
        y = fresh(x)
    np.testing.assert_array_equal(y.numpy(), y2.numpy())
    for name in ("saved_mean", "saved_inv_var", "relu_mask"):
        np.testing.assert_array_equal(getattr(fresh.saved, name).numpy(), getattr(second, name).numpy())
    np.testing.assert_array_equal(fresh.running_mean.numpy(), block.running_mean.numpy())
    np.testing.assert_array_equal(fresh.running_var.numpy(), block.running_var.numpy())
    assert second.path == first.path


def test_explain_of_a_rebound_plan_is_the_same_plan():
    x = lt.asarray(arr((6, 5), 0))
    first = lt.explain(x - x.mean(axis=0), source=False)
    y = lt.asarray(arr((6, 5), 1))
    second = lt.explain(y - y.mean(axis=0), source=False)
    assert recipes.count() == 1
    assert "plan cache: miss" in first and "plan cache: hit" in second
    def without_cache(text):
        return [line for line in text.splitlines() if not line.startswith("plan cache")]
    assert without_cache(second) == without_cache(first)


def test_threads_sharing_recipes_get_their_own_results():
    from concurrent.futures import ThreadPoolExecutor
    shapes = [(5, 3), (6, 3), (5, 4)]

    def work(seed):
        for k in range(20):
            a_np = arr(shapes[(seed + k) % 3], seed * 100 + k)
            a = lt.asarray(a_np)
            np.testing.assert_allclose(lt.evaluate(a - lt.std(a, axis=0)).numpy(), a_np - np.std(a_np, axis=0),
                                       rtol=1e-5, atol=1e-5)
        return True
    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(8)))
    assert recipes.count() == 3
