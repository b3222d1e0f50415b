"""CUDA graph replay of plan recipes: a call over the same addresses as an earlier one launches the
captured graph, with the same results as running the steps one by one; new values in the same
memory are read; results a caller keeps are never overwritten; steps that cannot be captured are
run as they are, and lt.explain says why."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lazytensor as lt
from tests.support.devices import cudnn_ready
from lazytensor.reuse import recipes; from lazytensor.reuse import replay
from lazytensor.kernels import launch_log
from lazytensor.kernels.backend import Backend
from tests.support.stand_in_graphs import stand_in_graphs


needs_cudnn = pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and cuDNN")
needs_cuda = pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")


@pytest.fixture(autouse=True)
def fresh_recipes():
    recipes.clear()
    lt.release_graphs()
    yield
    recipes.clear()
    lt.release_graphs()


# -- the bookkeeping, with a stand-in backend (runs everywhere) -------------------------------------

class FakeGraph:
    def __init__(self, run):
        self.run, self.launches = run, 0

    def launch(self):
        self.launches += 1


class FakeBackend(Backend):
    name = "fake"
    graphs = True

    def __init__(self, fail=False):
        self.fail, self.captured = fail, []

    def capture(self, run):
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        run()                   # a real capture runs the steps' host code too; the GPU runs nothing
        graph = FakeGraph(run)
        self.captured.append(graph)
        return graph


class Step:
    def __init__(self, log, refusal=None):
        self.log, self.refusal = log, refusal

    def run(self):
        self.log.append("run")
        launch_log.record(launch_log.KernelRecord("k", "fake", "elementwise", 4, "memory", 0.0))

    def capture_refusal(self):
        return self.refusal


def test_a_key_is_run_then_captured_then_replayed():
    backend = FakeBackend()
    replays = replay.Replays(backend)
    assert replays.step_for("k") is None                 # first sighting: the steps run as they are
    entry = replays.step_for("k")
    log: list = []
    entry.steps = [Step(log), Step(log)]
    entry.run()                                          # captured (the steps run inside the capture) and launched
    assert log == ["run", "run"] and entry.graph is backend.captured[0] and entry.graph.launches == 1
    assert entry.steps is None                           # a graph holds no arrays
    assert replays.step_for("k") is entry
    with lt.profile() as p:
        entry.run()
    assert log == ["run", "run"] and entry.graph.launches == 2
    [record] = p.kernels                                             # one launch, of two steps and their kernels
    assert record.kind == "graph" and record.config == "2 steps, kernels k, k" and record.elements == 8
    assert (replays.captures, replays.replays) == (1, 1)


def test_a_step_that_cannot_be_captured_stops_replay_for_the_recipe():
    replays = replay.Replays(FakeBackend())
    replays.step_for("k")
    entry = replays.step_for("k")
    log: list = []
    entry.steps = [Step(log), Step(log, refusal="a reduction takes its scratch memory from the pool")]
    entry.run()
    assert log == ["run", "run"] and entry.graph is None
    assert replays.refusal == "a reduction takes its scratch memory from the pool" and not replays.entries


def test_failed_captures_run_the_steps_and_give_up_after_two():
    replays = replay.Replays(FakeBackend(fail=True))
    log: list = []
    for attempt in range(2):
        replays.step_for("k")
        entry = replays.step_for("k")
        entry.steps = [Step(log)]
        entry.run()
        assert entry.graph is None and log == ["run"] * (attempt + 1)
    assert replays.refusal.startswith("capture failed: RuntimeError")


def test_the_graphs_of_a_recipe_are_bounded():
    replays = replay.Replays(FakeBackend())
    for k in range(3 * replay._MAX_GRAPHS):
        replays.step_for(k)
    assert len(replays.entries) <= replay._MAX_GRAPHS


def test_no_replay_on_the_cpu():
    x = lt.asarray(np.ones((4, 3), np.float32))
    text = lt.explain(x - x.mean(axis=0))
    assert "CUDA graph" not in text
    y = lt.empty((4, 3), np.float32)
    for _ in range(3):
        y[...] = x - x.mean(axis=0)
    assert recipes.count() == 1


# -- the whole path on the CPU, with stand-in graphs --------------------------------------------------

@pytest.fixture
def cpu_graphs(monkeypatch):
    """The CPU backend given stand-in graphs, with every step taken as capturable."""
    stand_in_graphs(monkeypatch)


def _cbr_operands(c=3, k=8, seed=0):
    rng = np.random.default_rng(seed)
    x = lt.asarray(rng.standard_normal((2, 5, 4, c)).astype(np.float32))
    w = lt.asarray((rng.standard_normal((k, 3, 3, c)) / 5).astype(np.float32))
    g, b = lt.asarray(rng.uniform(0.5, 1.5, k).astype(np.float32)), lt.asarray(rng.uniform(-0.5, 0.5, k).astype(np.float32))
    return rng, x, w, g, b


def _the_recipe():
    [recipe] = [r for r in recipes._recipes.values() if r is not recipes.PLAN_EACH_TIME]
    return recipe


def _cbr_loop(x, w, g, b, calls, replayed: bool, monkeypatch):
    monkeypatch.setattr(replay, "ENABLED", replayed)
    recipes.clear()
    k = w.shape[0]
    rm, rv = lt.zeros((k,), np.float32), lt.ones((k,), np.float32)
    y = lt.empty(x.shape[:3] + (k,), np.float32)
    saved = lt.BatchNormSaved()
    out = []
    for i in range(calls):
        x.data[...] = np.random.default_rng(i).standard_normal(x.shape) * (i + 1)
        y[...] = lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), g, b, rm, rv, saved=saved))
        out.append([v.numpy().copy() for v in (y, rm, rv, saved.saved_mean, saved.saved_inv_var, saved.relu_mask)])
    return out


def test_replayed_loop_equals_the_loop_step_by_step(cpu_graphs, monkeypatch):
    _, x, w, g, b = _cbr_operands()
    got = _cbr_loop(x, w, g, b, 7, True, monkeypatch)
    replays = _the_recipe().replays
    assert (replays.captures, replays.replays, replays.busy) == (1, 4, 0)    # seen, captured, then replayed
    want = _cbr_loop(x, w, g, b, 7, False, monkeypatch)
    for i, (a, b_) in enumerate(zip(got, want)):
        for name, u, v in zip(("y", "running_mean", "running_var", "saved_mean", "saved_inv_var", "mask"), a, b_):
            np.testing.assert_array_equal(u, v, err_msg=f"call {i}: {name}")


def test_results_still_held_are_not_written_again(cpu_graphs):
    _, x, w, g, b = _cbr_operands(seed=1)
    k = w.shape[0]
    rm, rv = lt.zeros((k,), np.float32), lt.ones((k,), np.float32)
    y = lt.empty(x.shape[:3] + (k,), np.float32)

    def call(saved):
        y[...] = lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), g, b, rm, rv, saved=saved))
        return saved

    for _ in range(3):
        call(lt.BatchNormSaved())                       # seen, captured: the graph keeps its temporaries
    replays = _the_recipe().replays
    kept = call(lt.BatchNormSaved())                    # replayed: the graph's results, handed out again
    assert replays.replays == 1
    values = {n: getattr(kept, n).numpy().copy() for n in ("saved_mean", "saved_inv_var", "relu_mask")}
    x.data[...] *= 3
    later = call(lt.BatchNormSaved())                   # `kept` still holds them: fresh temporaries
    assert replays.busy == 1 and later.saved_mean is not kept.saved_mean
    for n, v in values.items():
        np.testing.assert_array_equal(getattr(kept, n).numpy(), v)
    view = later.saved_mean.data[1:]                    # a view of a result is a hold on it too
    del kept, later
    call(lt.BatchNormSaved())
    assert replays.busy == 1 and replays.replays == 2   # `later` was a step-by-step call: not the graph's
    held = call(lt.BatchNormSaved())
    view_of_graph = held.relu_mask.data[:1]
    del held
    call(lt.BatchNormSaved())
    assert replays.busy == 2                            # the view of the graph's mask still holds it
    del view_of_graph, view
    call(lt.BatchNormSaved())
    assert replays.busy == 2 and replays.replays == 4


def test_graphs_are_released_least_recently_launched_first_within_the_budget(cpu_graphs, monkeypatch):
    _, x, w, g, b = _cbr_operands()
    k = w.shape[0]
    rm, rv = lt.zeros((k,), np.float32), lt.ones((k,), np.float32)
    ys = [lt.empty(x.shape[:3] + (k,), np.float32) for _ in range(4)]
    for y in ys:
        for _ in range(3):                              # by the third call over each destination: captured
            y[...] = lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), g, b, rm, rv))
    replays = _the_recipe().replays
    assert replays.captures == 4 and len(replay._live) == 4
    one = replay._kept[0] // 4
    monkeypatch.setattr(replay, "BUDGET", 4 * one)      # room for four graphs
    ys[0][...] = lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), g, b, rm, rv))   # replayed: now the most recent
    y = lt.empty(x.shape[:3] + (k,), np.float32)
    for _ in range(3):
        y[...] = lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), g, b, rm, rv))
    assert replays.captures == 5 and len(replay._live) == 4 and replay._kept[0] == 4 * one
    kept = {entry.key[1] for entry in replay._live}     # the destination's address
    assert ys[1].data.ctypes.data not in kept and ys[0].data.ctypes.data in kept
    lt.release_graphs()
    assert not replay._live and replay._kept[0] == 0


CALL = st.tuples(st.just("call"), st.booleans(), st.booleans(), st.integers(0, 1))   # new values, new holder, which destination
ACTIONS = st.lists(st.one_of(
    CALL, CALL, CALL,
    st.tuples(st.just("keep"), st.sampled_from(["saved_mean", "saved_inv_var", "relu_mask"]), st.booleans()),
    st.tuples(st.just("drop"), st.integers(0, 7))), min_size=1, max_size=30)
# Three calls into each destination first: both have a graph before the drawn actions start.
CAPTURED = [("call", True, False, 0)] * 3 + [("call", True, False, 1)] * 3


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS)
def test_any_sequence_of_calls_and_holds_keeps_results_intact(cpu_graphs, monkeypatch, actions):
    """A replayed loop against the same loop run step by step, call for call, while the caller keeps
    and drops results (a Tensor, or a view of its array): the two agree on every output, and a kept
    result never changes."""
    recipes.clear()
    lt.release_graphs()
    _, x, w, g, b = _cbr_operands(seed=2)
    k = w.shape[0]

    def loop():
        return {"rm": lt.zeros((k,), np.float32), "rv": lt.ones((k,), np.float32), "saved": lt.BatchNormSaved(),
                "ys": [lt.empty(x.shape[:3] + (k,), np.float32) for _ in range(2)]}
    replayed, stepwise = loop(), loop()
    kept = []                                   # (the held object, its values when taken)
    for i, action in enumerate(CAPTURED + actions):
        if action[0] == "call":
            _, new_values, new_holder, dest = action
            if new_values:
                x.data[...] = np.random.default_rng(i).standard_normal(x.shape) + i
            for state, enabled in ((replayed, True), (stepwise, False)):
                monkeypatch.setattr(replay, "ENABLED", enabled)
                if new_holder:
                    state["saved"] = lt.BatchNormSaved()
                state["ys"][dest][...] = lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), g, b, state["rm"], state["rv"],
                                                               saved=state["saved"]))
            for name in ("saved_mean", "saved_inv_var", "relu_mask"):
                np.testing.assert_array_equal(getattr(replayed["saved"], name).numpy(),
                                              getattr(stepwise["saved"], name).numpy(), err_msg=f"action {i}: {name}")
            for name in ("rm", "rv"):
                np.testing.assert_array_equal(replayed[name].numpy(), stepwise[name].numpy(), err_msg=f"action {i}")
            np.testing.assert_array_equal(replayed["ys"][dest].numpy(), stepwise["ys"][dest].numpy())
        elif action[0] == "keep":
            _, name, as_view = action
            t = getattr(replayed["saved"], name)
            if t is None:                       # no call yet
                continue
            held = t.data[1:] if as_view else t
            kept.append((held, np.array(held.numpy() if not as_view else held, copy=True)))
        elif kept:
            kept.pop(action[1] % len(kept))
        for j, (held, value) in enumerate(kept):
            now = held.numpy() if isinstance(held, lt.Tensor) else held
            np.testing.assert_array_equal(now, value, err_msg=f"after action {i}: kept result {j} changed")
    monkeypatch.setattr(replay, "ENABLED", True)


def test_explain_tells_the_replay_state(cpu_graphs):
    _, x, w, g, b = _cbr_operands()
    k = w.shape[0]
    rm, rv = lt.zeros((k,), np.float32), lt.ones((k,), np.float32)
    y = lt.empty(x.shape[:3] + (k,), np.float32)
    expr = lambda: lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), g, b, rm, rv))  # noqa: E731
    for _ in range(4):
        y[...] = expr()
    text = lt.explain(expr(), out=y, source=False)
    assert "CUDA graph replay: the third call over the same tensors and destination" in text
    assert "1 captured, 1 replays so far, 0 calls step by step" in text


# -- on the GPU ---------------------------------------------------------------------------------------

def _operands(rng, n, h, w, c, k):
    x = rng.standard_normal((n, h, w, c)).astype(np.float16)
    wt = (rng.standard_normal((k, 3, 3, c)) / np.sqrt(9 * c)).astype(np.float16)
    gamma = rng.uniform(0.5, 1.5, k).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, k).astype(np.float32)
    return x, wt, gamma, beta


class Loop:
    """One CBR (+ skip) training or inference expression assigned into the same destination, call
    after call, with its own running statistics."""

    def __init__(self, ops, training, skip=None):
        x, wt, gamma, beta = ops
        k = wt.shape[0]
        self.x = lt.asarray(x, device="cuda")
        self.w, self.gamma, self.beta = (lt.asarray(v, device="cuda") for v in (wt, gamma, beta))
        self.rm = lt.asarray(np.linspace(-0.1, 0.1, k).astype(np.float32), device="cuda")
        self.rv = lt.asarray(np.linspace(0.5, 1.5, k).astype(np.float32), device="cuda")
        self.skip = None if skip is None else lt.asarray(skip, device="cuda")
        self.y = lt.empty(x.shape[:3] + (k,), np.float16, "cuda")
        self.training = training
        self.saved = lt.BatchNormSaved()

    def expression(self):
        bn = lt.batch_norm(lt.conv2d(self.x, self.w, padding=1), self.gamma, self.beta, self.rm, self.rv,
                           training=self.training, saved=self.saved)
        return lt.relu(bn if self.skip is None else bn + self.skip)

    def call(self, x_values):
        self.x.data[...] = lt.asarray(x_values, device="cuda").data      # new values, same memory
        self.y[...] = self.expression()
        out = {"y": self.y.numpy(), "rm": self.rm.numpy(), "rv": self.rv.numpy()}
        if self.training:
            out.update(mean=self.saved.saved_mean.numpy(), inv_var=self.saved.saved_inv_var.numpy(),
                       mask=self.saved.relu_mask.numpy())
        return out


@pytest.mark.gpu
@needs_cudnn
@pytest.mark.parametrize("training, residual", [(True, False), (True, True), (False, False)])
def test_replayed_calls_equal_calls_step_by_step(monkeypatch, training, residual):
    rng = np.random.default_rng(3)
    ops = _operands(rng, 2, 6, 5, 8, 16)
    skip = rng.standard_normal((2, 6, 5, 16)).astype(np.float16) if residual else None
    xs = [rng.standard_normal((2, 6, 5, 8)).astype(np.float16) * (1 + i) for i in range(6)]
    graphs = Loop(ops, training, skip)
    with lt.profile() as p:
        got = [graphs.call(x) for x in xs]
    replayed = sum(k.kind == "graph" for k in p.kernels)
    assert replayed > 0, "no call was replayed as a CUDA graph"
    assert "replays so far" in lt.explain(graphs.expression(), out=graphs.y, source=False)

    monkeypatch.setattr(replay, "ENABLED", False)
    recipes.clear()
    steps = Loop(ops, training, skip)
    with lt.profile() as p:
        want = [steps.call(x) for x in xs]
    assert not any(k.kind == "graph" for k in p.kernels)
    assert "off (LAZYTENSOR_CUDA_GRAPHS=0)" in lt.explain(steps.expression(), out=steps.y, source=False)
    for i, (g, w) in enumerate(zip(got, want)):
        for name in w:
            np.testing.assert_array_equal(g[name], w[name], err_msg=f"call {i}: {name}")


@pytest.mark.gpu
@needs_cudnn
def test_results_a_caller_keeps_are_not_overwritten():
    """The CBR block makes a new holder per training call; holding on to one keeps its memory out of
    the pool, so later calls run over other addresses and cannot replay a graph into it."""
    rng = np.random.default_rng(4)
    x, wt, _, _ = _operands(rng, 2, 5, 5, 8, 8)
    block = lt.cbr.CBR(8, 8, 3, padding=1, dtype=np.float16, device="cuda")
    block.weight = lt.asarray(wt, device="cuda")
    xt = lt.asarray(x, device="cuda")
    kept = []
    for i in range(6):
        xt.data[...] = lt.asarray(x * (i + 1), device="cuda").data
        y = block(xt)
        kept.append((y, block.saved, y.numpy(), block.saved.saved_mean.numpy(), block.saved.relu_mask.numpy()))
    for y, saved, y_np, mean_np, mask_np in kept:
        np.testing.assert_array_equal(y.numpy(), y_np)
        np.testing.assert_array_equal(saved.saved_mean.numpy(), mean_np)
        np.testing.assert_array_equal(saved.relu_mask.numpy(), mask_np)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("rows", [64, 1 << 16])        # one block per column, and a split reduction with scratch
def test_reductions_inside_expressions_replay_and_read_new_values(rows):
    rng = np.random.default_rng(5)
    a = lt.asarray(rng.standard_normal((rows, 33)).astype(np.float32), device="cuda")
    y = lt.empty(a.shape, np.float32, "cuda")
    with lt.profile() as p:
        for i in range(6):
            a_np = rng.standard_normal((rows, 33)).astype(np.float32) * (i + 1)
            a.data[...] = lt.asarray(a_np, device="cuda").data
            y[...] = a - a.mean(axis=0)
            np.testing.assert_allclose(y.numpy(), a_np - a_np.mean(axis=0, dtype=np.float64), rtol=1e-5,
                                       atol=1e-5 * (i + 1), err_msg=f"call {i}")
    assert any(k.kind == "graph" for k in p.kernels)
    assert "replays so far" in lt.explain(a - a.mean(axis=0), out=y, source=False)
