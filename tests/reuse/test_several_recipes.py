"""Plans of several results are kept as recipes (lazytensor.reuse.several_recipes): a second call of
the same structure plans nothing, and its values are NumPy's, over new values in the same tensors
and destinations that the expressions read (in-place updates)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lazytensor as lt
from lazytensor.kernels.backend import Backend
from lazytensor.reuse import several_recipes
from tests.support.stand_in_graphs import stand_in_graphs

SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Candidate results over the leaves a, b (shape s) and c (shape s[-1:]): (lazytensor, NumPy).
PROGRAMS = {
    "a*b+c": (lambda a, b, c: a * b + c, lambda a, b, c: a * b + c),
    "tanh(a)*c": (lambda a, b, c: lt.tanh(a) * c, lambda a, b, c: np.tanh(a) * c),
    "a.sum(0)+c": (lambda a, b, c: a.sum(axis=0) + c, lambda a, b, c: a.sum(axis=0) + c),
    "a-a.mean()": (lambda a, b, c: a - a.mean(), lambda a, b, c: a - a.mean()),
    "b.max(0)": (lambda a, b, c: b.max(axis=0), lambda a, b, c: b.max(axis=0)),
    "relu(a@b.T)@b": (lambda a, b, c: lt.relu(a @ b.T) @ b, lambda a, b, c: np.maximum(a @ b.T, 0) @ b),
    "b-0.5*(a@b.T)@a": (lambda a, b, c: b - 0.5 * ((a @ b.T) @ a), lambda a, b, c: b - 0.5 * ((a @ b.T) @ a)),
}
LEAVES = "abc"


def _run(names, dest_kinds, shape, seed, calls=3):
    """Assigns the programs `names` together `calls` times, with new values in the leaves before each
    call; a destination kind 'a'/'b'/'c' is that leaf itself (an in-place update), 'new' a tensor of
    its own. Checks every call against NumPy and returns the planner runs of each call."""
    rng = np.random.default_rng(seed)
    shapes = {"a": shape, "b": shape, "c": shape[-1:]}
    leaves = {k: lt.asarray(rng.standard_normal(shapes[k])) for k in LEAVES}
    dests = []
    for name, kind in zip(names, dest_kinds):
        want = PROGRAMS[name][1](*(np.ones(shapes[k]) for k in LEAVES))
        dests.append(leaves[kind] if kind in leaves and shapes[kind] == want.shape else lt.zeros(want.shape))
    if len({id(d) for d in dests}) < len(dests):
        dests = [lt.zeros(d.shape) for d in dests]        # one destination twice: each its own
    plans = []
    for _ in range(calls):
        for k in LEAVES:
            if not any(d is leaves[k] for d in dests) or rng.random() < 0.5:
                leaves[k][...] = rng.standard_normal(shapes[k])
        values = [leaves[k].numpy() for k in LEAVES]
        want = [PROGRAMS[name][1](*values) for name in names]
        before = several_recipes.plans_made[0]
        lt.assign([(d, PROGRAMS[name][0](*(leaves[k] for k in LEAVES))) for d, name in zip(dests, names)])
        plans.append(several_recipes.plans_made[0] - before)
        for d, w, name in zip(dests, want, names):
            np.testing.assert_allclose(d.numpy(), w, rtol=1e-12, atol=1e-12, err_msg=name)
    return plans


@SETTINGS
@given(names=st.lists(st.sampled_from(sorted(PROGRAMS)), min_size=2, max_size=4),
       dest_kinds=st.lists(st.sampled_from(["a", "b", "c", "new"]), min_size=4, max_size=4),
       shape=st.tuples(st.integers(1, 5), st.integers(1, 6)), seed=st.integers(0, 99))
def test_random_several_result_programs_are_planned_once(names, dest_kinds, shape, seed):
    plans = _run(names, dest_kinds, shape, seed)
    assert plans[0] <= 1 and plans[1:] == [0] * (len(plans) - 1), plans


def test_a_momentum_step_is_planned_once():
    plans = _run(["a*b+c", "b-0.5*(a@b.T)@a"], ["a", "b"], (4, 3), 0, calls=4)
    assert plans == [1, 0, 0, 0]


def test_evaluate_of_several_results_is_planned_once():
    rng = np.random.default_rng(1)
    x = lt.asarray(rng.standard_normal((6, 5)))
    for k in range(3):
        x[...] = rng.standard_normal((6, 5))
        before = several_recipes.plans_made[0]
        s, m = lt.evaluate(x.sum(axis=1), x - x.max())
        assert several_recipes.plans_made[0] - before == (1 if k == 0 else 0)
        np.testing.assert_allclose(s.numpy(), x.numpy().sum(axis=1), rtol=1e-12)
        np.testing.assert_array_equal(m.numpy(), x.numpy() - x.numpy().max())


def test_another_scalar_or_layout_is_another_recipe():
    x = lt.asarray(np.arange(12.0).reshape(3, 4))
    y, z = lt.zeros((3, 4)), lt.zeros((4,))
    before = several_recipes.plans_made[0]
    lt.assign([(y, x * 2.0 - x.sum()), (z, x.sum(axis=0))])
    lt.assign([(y, x * 3.0 - x.sum()), (z, x.sum(axis=0))])      # scalars are part of the structure
    lt.assign([(y, x * 3.0 - x.sum()), (z, x.sum(axis=0))])      # the same again
    assert several_recipes.plans_made[0] - before == 2
    np.testing.assert_array_equal(y.numpy(), np.arange(12.0).reshape(3, 4) * 3 - 66)


def test_explain_says_the_plan_is_kept():
    x = lt.asarray(np.ones((3, 4)))
    text = str(lt.explain([x - x.sum(), x.sum(axis=0)], source=False))
    assert "recipe: kept after the first call" in text


def test_graph_memory_defaults_to_a_share_of_the_device(monkeypatch):
    from lazytensor.reuse import replay

    class Device(Backend):
        def __init__(self, total):
            self.memory_total = lambda: total
    monkeypatch.setattr(replay, "BUDGET", None)
    for total, want in [(141 << 30, (141 << 30) // 16), (8 << 30, 1 << 30)]:
        monkeypatch.setattr(replay, "_device_budget", [])
        assert replay.budget(Device(total)) == want
    monkeypatch.setattr(replay, "_device_budget", [])
    assert replay.budget(Backend()) == 1 << 30                  # a backend that cannot say: 1024 MB
    monkeypatch.setattr(replay, "BUDGET", 123 << 20)            # LAZYTENSOR_GRAPH_MEMORY=123
    assert replay.budget(Device(141 << 30)) == 123 << 20


@pytest.fixture
def cpu_graphs(monkeypatch):
    """The CPU backend given stand-in graphs, every step taken as capturable."""
    from lazytensor.reuse import replay
    stand_in_graphs(monkeypatch)
    monkeypatch.setattr(replay, "BUDGET", 64 << 20)


def _training(replayed, monkeypatch, steps=6):
    from lazytensor.reuse import recipes, replay
    monkeypatch.setattr(replay, "ENABLED", replayed)
    recipes.clear()
    rng = np.random.default_rng(7)
    x, labels = lt.asarray(rng.standard_normal((9, 6))), lt.asarray(rng.integers(0, 4, 9))
    layers = [lt.nn.Linear(6, 5, rng=rng, dtype=np.float64), lt.nn.Linear(5, 4, rng=rng, dtype=np.float64)]
    params = [p for layer in layers for p in layer.parameters()]
    seen = []
    with lt.profile() as p:
        for _ in range(steps):
            # nothing but the parameters is written or held: the same arrays on every call
            lt.assign([(w, w - 0.1 * g) for w, g in
                       zip(params, lt.grad(lt.cross_entropy(layers[1](lt.relu(layers[0](x))), labels), params))])
            seen.append(params[0].numpy())
    return seen, [q.numpy() for q in params], sum(k.kind == "graph" for k in p.kernels)


@pytest.mark.compiled_tier
def test_replayed_training_steps_equal_steps_run_one_by_one(cpu_graphs, monkeypatch):
    """Several results (an SGD step of every parameter) replayed as one (stand-in) graph: the same
    parameters after each step as the same steps run step by step."""
    got, got_params, launches = _training(True, monkeypatch)
    want, want_params, none = _training(False, monkeypatch)
    assert launches > 0 and none == 0
    for a, b in zip(got + got_params, want + want_params):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(got[0], got[-1])


def test_a_plan_beyond_the_graph_budget_runs_step_by_step_and_explain_says_what_to_set(cpu_graphs, monkeypatch):
    from lazytensor.reuse import replay
    monkeypatch.setattr(replay, "BUDGET", 1024)             # a quarter of it: 256 bytes
    x = lt.asarray(np.ones((64, 8)))
    y, z = lt.zeros((64, 8)), lt.zeros((8,))
    with lt.profile() as p:
        for _ in range(4):
            lt.assign([(y, x - x.sum(axis=1, keepdims=True)), (z, (x * 2).sum(axis=0))])
    assert not any(k.kind == "graph" for k in p.kernels)
    text = str(lt.explain([(y, x - x.sum(axis=1, keepdims=True)), (z, (x * 2).sum(axis=0))], source=False))
    assert "exceed a quarter of the memory graphs may keep" in text and "set LAZYTENSOR_GRAPH_MEMORY above" in text, text
