"""lt.conv_grads (wgrad, then dgrad) kept as a plan recipe: the second call with the same structure
plans nothing and gives, bit for bit, what the plan made afresh gives, over new values; with stand-in
CUDA graphs on the CPU (as tests/nn/test_train_step_graph.py), the third call over the same arrays
launches one graph, which hands its results out again only when the caller no longer holds the
previous ones. The write hazard on two streams: dgrad waits on wgrad's event when dX takes X's
memory, checked with a stand-in of CuPy's streams and events that records the order of the calls."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.reuse import conv_grads as cg
from lazytensor.reuse import recipes
from lazytensor.plan.steps import run_steps
from tests.support.stand_in_graphs import stand_in_graphs


@pytest.fixture(autouse=True)
def fresh_recipes():
    recipes.clear()
    yield
    recipes.clear()
    lt.release_graphs()


def _case(rng, n, h, c, k, r, stride, padding):
    x = lt.asarray(rng.standard_normal((n, h, h, c)).astype(np.float32))
    w = lt.asarray(rng.standard_normal((k, r, r, c)).astype(np.float32))
    conv = lt.conv2d(x, w, stride=stride, padding=padding)
    d_conv = lt.asarray(rng.standard_normal(conv.shape).astype(np.float32))
    return x, w, conv.attrs, d_conv


def _afresh(d_conv, x, w, attrs, dx_in_x=False):
    """The plan made anew (no recipe), run: the reference of the recipe's results."""
    steps, dx, dw = cg.plan_conv_grads(d_conv, x, w, attrs, dx_in_x)
    run_steps(steps)
    return dx.copy(), dw.copy()


@settings(max_examples=6, deadline=None)
@given(n=st.integers(1, 3), h=st.integers(3, 7), c=st.integers(1, 5), k=st.integers(1, 6), r=st.sampled_from([1, 3]),
       stride=st.integers(1, 2), padding=st.integers(0, 1), as_expression=st.booleans(), seed=st.integers(0, 2**16))
def test_the_second_call_plans_nothing_and_gives_the_same_bits(n, h, c, k, r, stride, padding, as_expression, seed):
    recipes.clear()
    rng = np.random.default_rng(seed)
    x, w, attrs, d_conv = _case(rng, n, h, c, k, r, stride, padding)
    plans = []
    for call in range(3):
        for t in (x, w, d_conv):            # new values in the same tensors on every call
            t[...] = lt.asarray(rng.standard_normal(t.shape).astype(np.float32))
        d = d_conv * 0.5 + 1.0 if as_expression else d_conv      # an expression is planned with the convs
        want_dx, want_dw = _afresh(d_conv * 0.5 + 1.0 if as_expression else d_conv, x, w, attrs)
        before = cg.plans_made[0]
        dx, dw = lt.conv_grads(d, x, w, attrs)
        plans.append(cg.plans_made[0] - before)
        np.testing.assert_array_equal(dx.numpy(), want_dx)
        np.testing.assert_array_equal(dw.numpy(), want_dw)
    assert plans == [1, 0, 0]


def test_each_call_gets_results_of_its_own():
    rng = np.random.default_rng(1)
    x, w, attrs, d_conv = _case(rng, 2, 6, 3, 4, 3, 1, 1)
    first = lt.conv_grads(d_conv, x, w, attrs)
    kept = [t.numpy().copy() for t in first]
    d_conv[...] = d_conv * 2.0
    second = lt.conv_grads(d_conv, x, w, attrs)
    for a, b in zip(first, kept):                       # the first call's results were not overwritten
        np.testing.assert_array_equal(a.numpy(), b)
    np.testing.assert_allclose(second[1].numpy(), 2 * kept[1], rtol=1e-5)


def test_dx_in_x_through_the_recipe_writes_each_calls_x():
    rng = np.random.default_rng(2)
    x_host = rng.standard_normal((2, 6, 6, 3)).astype(np.float32)
    _, w, attrs, d_conv = _case(rng, 2, 6, 3, 4, 3, 1, 1)
    for call in range(3):
        want_dx, want_dw = _afresh(d_conv, lt.asarray(x_host), w, attrs)
        x = lt.asarray(x_host.copy())
        before = cg.plans_made[0]
        dx, dw = lt.conv_grads(d_conv, x, w, attrs, dx_in_x=True)
        assert cg.plans_made[0] - before == (1 if call == 0 else 0)
        assert dx.data is x.data
        np.testing.assert_array_equal(dx.numpy(), want_dx)
        np.testing.assert_array_equal(dw.numpy(), want_dw)


# -- graph replay with stand-in graphs ----------------------------------------------------------------

@pytest.fixture
def cpu_graphs(monkeypatch):
    yield stand_in_graphs(monkeypatch)
    lt.release_graphs()


def test_the_third_call_launches_one_graph_and_held_results_stay(cpu_graphs):
    rng = np.random.default_rng(4)
    x, w, attrs, d_conv = _case(rng, 2, 6, 3, 8, 3, 1, 1)
    wants = []
    for call in range(5):
        d_conv[...] = lt.asarray(rng.standard_normal(d_conv.shape).astype(np.float32))
        wants.append(_afresh(d_conv, x, w, attrs))
        dx, dw = lt.conv_grads(d_conv, x, w, attrs)
        np.testing.assert_array_equal(dx.numpy(), wants[-1][0])
        np.testing.assert_array_equal(dw.numpy(), wants[-1][1])
        del dx, dw                                      # not held: the graph may hand them out again
    [graph] = cpu_graphs
    assert graph.launches == 3                          # call 3 captures and launches it; calls 4 and 5 launch it
    # results the caller still holds are never written again: that call runs step by step
    held = lt.conv_grads(d_conv, x, w, attrs)
    kept = [t.numpy().copy() for t in held]
    d_conv[...] = d_conv * -3.0
    want = _afresh(d_conv, x, w, attrs)
    again = lt.conv_grads(d_conv, x, w, attrs)
    assert graph.launches == 4                          # `held` came from the graph; `again` did not
    for t, k in zip(held, kept):
        np.testing.assert_array_equal(t.numpy(), k)
    for t, k in zip(again, want):
        np.testing.assert_array_equal(t.numpy(), k)


# -- the write hazard on two streams ------------------------------------------------------------------

class _Recorder:
    """Stand-ins of CuPy's streams and events: each call appended to one log, as (what, who)."""

    def __init__(self):
        self.log, self.current = [], None
        recorder = self

        class Event:
            def __init__(self, disable_timing=True):
                self.name = f"event{len(recorder.log)}"

            def record(self, stream):
                recorder.log.append(("record", self, stream))

        class Stream:
            def __init__(self, name):
                self.name = name

            def wait_event(self, event):
                recorder.log.append(("wait", event, self))

            def __enter__(self):
                self.before, recorder.current = recorder.current, self

            def __exit__(self, *exc):
                recorder.current = self.before

        self.main, self.side = Stream("main"), Stream("side")
        self.current = self.main
        self.module = types.SimpleNamespace(cuda=types.SimpleNamespace(
            Event=Event, get_current_stream=lambda: recorder.current))

    def step(self, kind):
        recorder = self

        class Step:
            def run(self):
                recorder.log.append(("run", kind, recorder.current))

            def describe(self, source=True):
                return kind
        return Step()


def _two_stream_log(monkeypatch, dx_in_x):
    rec = _Recorder()
    monkeypatch.setitem(sys.modules, "cupy", rec.module)
    pair = cg.WgradThenDgrad(types.SimpleNamespace(name="cuda", streams=True), rec.step("wgrad"), rec.step("dgrad"), dx_in_x,
                             side=rec.side)
    pair.run()
    return rec, pair


@pytest.mark.parametrize("dx_in_x", [True, False])
def test_two_streams_order_dgrad_after_wgrad_by_an_event_when_dx_takes_x(monkeypatch, dx_in_x):
    rec, pair = _two_stream_log(monkeypatch, dx_in_x)
    forked, wgrad_done = pair.events
    log = rec.log
    wgrad = log.index(("run", "wgrad", rec.side))
    dgrad = log.index(("run", "dgrad", rec.main))
    assert log.index(("record", forked, rec.main)) < log.index(("wait", forked, rec.side)) < wgrad
    done = log.index(("record", wgrad_done, rec.side))
    assert wgrad < done
    waits = [i for i, e in enumerate(log) if e == ("wait", wgrad_done, rec.main)]
    if dx_in_x:     # the hazard: dX overwrites X, which wgrad reads: dgrad waits on wgrad's event
        assert waits and waits[0] < dgrad and done < waits[0]
    else:           # dgrad runs alongside wgrad; only the join waits
        assert waits == [max(waits)] and waits[0] > dgrad
    assert waits[-1] == len(log) - 1                    # joined back: whatever follows sees dW
    text = pair.describe(False)
    assert ("after wgrad's event" in text) == dx_in_x


def test_explain_shows_the_steps_and_the_recipe():
    rng = np.random.default_rng(6)
    x, w, attrs, d_conv = _case(rng, 2, 6, 3, 4, 3, 1, 1)
    call = lt.ConvGradsCall(d_conv, x, w, attrs)
    text = str(lt.explain(call, source=False))
    assert "wgrad: dw = conv2d_backward_filter" in text and "dgrad: dx = conv2d_backward_data" in text
    assert "WgradThenDgrad on cpu: one after the other" in text
    assert "recipe: kept after the first call" in text and "CUDA graph replay" not in text
    dx, dw = call()
    np.testing.assert_array_equal(dw.numpy(), _afresh(d_conv, x, w, attrs)[1])


def test_a_replayed_forward_and_backward_never_hand_out_stale_results(cpu_graphs):
    # the training loop forward -> stage 1 -> conv_grads, the forward and conv_grads replayed by
    # stand-in graphs: each call's gradients are its own forward's; a backward built after forward A
    # reads A though forward B ran (the graph could not hand A's saved results out again while the
    # backward held them); released results raise, replay or not
    rng = np.random.default_rng(8)
    shape, k = (2, 6, 6, 8), 8
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    x = lt.asarray(xs[0].copy())
    w = lt.asarray(rng.standard_normal((k, 3, 3, 8)).astype(np.float32))
    gamma, beta = (lt.asarray(rng.uniform(0.5, 1.5, k).astype(np.float32)) for _ in range(2))
    saved = lt.BatchNormSaved()
    running = lt.zeros((k,), np.float32), lt.ones((k,), np.float32)
    attrs = lt.conv2d(x, w, padding=1).attrs
    out = lt.empty(shape[:3] + (k,), np.float32)
    dy = lt.asarray(rng.standard_normal(out.shape).astype(np.float32))

    def forward(i):         # built on every call, as a training loop does
        x[...] = lt.asarray(xs[i])
        out[...] = lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), gamma, beta, *running, saved=saved))

    results = []
    for call in range(6):
        forward(call % 2)
        d_conv, dgamma, _, _ = lt.cbr_bn_backward(dy, saved, gamma)
        dx, dw = lt.conv_grads(d_conv, x, w, attrs)
        results.append([t.numpy().copy() for t in (dx, dw, lt.evaluate(dgamma))])
        del dx, dw, d_conv, dgamma
    # the forward's graph and conv_grads' (stage 1 within it) were captured and launched (a stand-in
    # graph holds the steps it re-runs, and so the forward's results it reads: later forwards then run
    # step by step, which a CUDA graph, holding no arrays, does not cause)
    assert len(cpu_graphs) >= 2 and sum(g.launches for g in cpu_graphs) >= 3, [g.launches for g in cpu_graphs]
    for a, b in zip(results, results[2:]):                  # the same forward, the same gradients
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5)
    forward(0)
    d_conv_a, _, _, _ = lt.cbr_bn_backward(dy, saved, gamma)
    forward(1)                                              # forward B, while A's backward is held
    dx_a, dw_a = lt.conv_grads(d_conv_a, lt.asarray(xs[0]), w, attrs)
    np.testing.assert_allclose(dw_a.numpy(), results[0][1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx_a.numpy(), results[0][0], rtol=1e-5, atol=1e-5)
    saved.release()
    with pytest.raises(ValueError, match="released"):
        lt.cbr_bn_backward(dy, saved, gamma)


def test_the_first_layer_plans_wgrad_alone():
    rng = np.random.default_rng(9)
    x, w, attrs, d_conv = _case(rng, 2, 6, 3, 4, 3, 1, 1)
    _, want_dw = _afresh(d_conv, x, w, attrs)
    for call in range(2):
        before = cg.plans_made[0]
        dx, dw = lt.conv_grads(d_conv * 1.0, x, w, attrs, first_layer=True)
        assert cg.plans_made[0] - before == (1 - call) and dx is None
        np.testing.assert_array_equal(dw.numpy(), want_dw)
    text = str(lt.explain(lt.ConvGradsCall(d_conv, x, w, attrs, first_layer=True), source=False))
    assert "no dX (first layer)" in text and "no dgrad is planned" in text and "dgrad: dx" not in text
    with pytest.raises(ValueError, match="no dgrad"):
        lt.conv_grads(d_conv, x, w, attrs, dx_in_x=True, first_layer=True)


def test_expressions_and_strided_operands_are_planned_with_the_convolutions():
    # x an expression, w a strided view: their copies are steps of the recipe, rebound on each call
    rng = np.random.default_rng(10)
    x, w, attrs, d_conv = _case(rng, 2, 5, 3, 4, 3, 1, 1)
    w_big = lt.asarray(rng.standard_normal((4, 3, 3, 6)).astype(np.float32))
    for call in range(3):
        x[...] = lt.asarray(rng.standard_normal(x.shape).astype(np.float32))
        w_big[...] = lt.asarray(rng.standard_normal(w_big.shape).astype(np.float32))
        w_view = w_big[:, :, :, ::2]
        want = _afresh(d_conv, x * 2.0, lt.asarray(np.ascontiguousarray(w_view.numpy())), attrs)
        before = cg.plans_made[0]
        dx, dw = lt.conv_grads(d_conv, x * 2.0, w_view, attrs)
        assert cg.plans_made[0] - before == (1 if call == 0 else 0)
        np.testing.assert_array_equal(dx.numpy(), want[0])
        np.testing.assert_array_equal(dw.numpy(), want[1])
