"""lt.conv_grads on CUDA (GPU only): the recipe replayed as one CUDA graph (one stream and two) gives
what the plan made afresh gives, bit for bit, over new values in the same tensors, and never hands
out results the caller still holds; the write hazard on two streams, with wgrad held back by a spin
kernel on its stream: dgrad waits on wgrad's event when dX takes X's memory (without that wait dW
is computed from a clobbered X, which the test shows too)."""
import numpy as np
import pytest

import lazytensor as lt
from tests.support.devices import cudnn_ready
from lazytensor.reuse import conv_grads as cg
from lazytensor.reuse import recipes
from lazytensor.plan.steps import run_steps

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and the cuDNN frontend")]


@pytest.fixture(autouse=True)
def fresh():
    recipes.clear()
    lt.release_graphs()
    yield
    recipes.clear()
    lt.release_graphs()


def _case(seed=0, x_shape=(8, 14, 14, 64), w_shape=(64, 3, 3, 64)):
    rng = np.random.default_rng(seed)
    x = lt.asarray(rng.standard_normal(x_shape).astype(np.float16), device="cuda")
    w = lt.asarray((rng.standard_normal(w_shape) * 0.1).astype(np.float16), device="cuda")
    conv = lt.conv2d(x, w, padding=1)
    d_conv = lt.asarray(rng.standard_normal(conv.shape).astype(np.float16), device="cuda")
    return rng, x, w, conv.attrs, d_conv


def _afresh(d_conv, x, w, attrs, dx_in_x=False):
    steps, dx, dw = cg.plan_conv_grads(d_conv, x, w, attrs, dx_in_x)
    run_steps(steps)
    return dx.get(), dw.get()


@pytest.mark.parametrize("two_streams", [False, True])
def test_conv_grads_replayed_as_one_graph(two_streams, monkeypatch):
    monkeypatch.setattr(cg, "_choose_streams", lambda *a: (two_streams, "forced by the test"))
    rng, x, w, attrs, d_conv = _case()
    for call in range(5):
        d_conv[...] = lt.asarray(rng.standard_normal(d_conv.shape).astype(np.float16), device="cuda")
        want = _afresh(d_conv, x, w, attrs)
        with lt.profile() as p:
            dx, dw = lt.conv_grads(d_conv, x, w, attrs)
        kinds = [r.kind for r in p.kernels]
        if call >= 2:                       # the third call captures, later ones launch the graph
            assert kinds.count("graph") == 1, kinds
        if call >= 3:
            assert kinds == ["graph"], kinds
        np.testing.assert_array_equal(dx.numpy(), want[0])
        np.testing.assert_array_equal(dw.numpy(), want[1])
        del dx, dw
    # results still held are not written again: that call runs step by step over fresh arrays
    held = lt.conv_grads(d_conv, x, w, attrs)
    kept = [t.numpy() for t in held]
    d_conv[...] = d_conv * 2.0
    want = _afresh(d_conv, x, w, attrs)
    again = lt.conv_grads(d_conv, x, w, attrs)
    for t, k in zip(held, kept):
        np.testing.assert_array_equal(t.numpy(), k)
    for t, k in zip(again, want):
        np.testing.assert_array_equal(t.numpy(), k)


_SPIN = r"""extern "C" __global__ void lt_test_spin(long long cycles) {
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
}"""


class _HeldBack:
    """A stand-in for the wgrad step: a spin kernel of ~20 ms on the current stream, then the step."""
    __slots__ = ("step", "kernel")

    def __init__(self, step):
        import cupy
        self.step, self.kernel = step, cupy.RawKernel(_SPIN, "lt_test_spin")

    def run(self):
        self.kernel((1,), (1,), (np.int64(40_000_000),))
        self.step.run()

    def capture_refusal(self):
        return None

    def describe(self, source=True):
        return "wgrad, held back"


@pytest.mark.parametrize("wait", [True, False], ids=["ordered", "order_removed"])
def test_the_write_hazard_on_two_streams(wait):
    import cupy
    _, x, w, attrs, d_conv = _case(seed=3)
    x_host = x.numpy()
    _, want_dw = _afresh(d_conv, x, w, attrs)
    x_t = lt.asarray(x_host, device="cuda")
    steps, dx, dw = cg.plan_conv_grads(d_conv, x_t, w, attrs, dx_in_x=True)
    pair = steps[-1]
    assert isinstance(pair, cg.WgradThenDgrad) and dx is x_t.data
    run_steps(steps[:-1])
    # ordered: the plan's option (dX in X's memory: dgrad waits on wgrad's event); order removed: the
    # same streams with dgrad alongside wgrad, as for a dX of its own
    two = cg.WgradThenDgrad(pair.backend, _HeldBack(pair.wgrad), pair.dgrad, wait,
                            side=cupy.cuda.Stream(non_blocking=True))
    two.run()
    cupy.cuda.Device().synchronize()
    if wait:
        np.testing.assert_array_equal(dw.get(), want_dw)
    else:       # dgrad overwrote X before wgrad read it: the ordering is what keeps dW right
        assert not np.array_equal(dw.get(), want_dw)


@pytest.mark.parametrize("first_layer", [False, True])
def test_stage_one_within_conv_grads_is_one_graph(first_layer):
    # the CBR backward as one call: stage 1's expression planned with wgrad (and dgrad), replayed as one
    # graph, each call reading the forward it follows; the same bits as stage 1 and conv_grads apart
    rng = np.random.default_rng(11)
    n, h, c, k = 8, 14, 64, 64
    xs = [lt.asarray(rng.standard_normal((n, h, h, c)).astype(np.float16), device="cuda") for _ in range(2)]
    x = lt.empty((n, h, h, c), np.float16, device="cuda")
    w = lt.asarray((rng.standard_normal((k, 3, 3, c)) * 0.1).astype(np.float16), device="cuda")
    gamma, beta = (lt.asarray(rng.uniform(0.5, 1.5, k).astype(np.float32), device="cuda") for _ in range(2))
    running = lt.zeros((k,), np.float32, device="cuda"), lt.ones((k,), np.float32, device="cuda")
    saved = lt.BatchNormSaved()
    out = lt.empty((n, h, h, k), np.float16, device="cuda")
    dy = lt.asarray(rng.standard_normal(out.shape).astype(np.float16), device="cuda")
    attrs = lt.conv2d(x, w, padding=1).attrs
    d_conv_t = lt.empty(out.shape, np.float16, device="cuda")
    for call in range(6):
        x[...] = xs[call % 2]
        out[...] = lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), gamma, beta, *running, saved=saved))
        d_conv_t[...] = lt.cbr_bn_backward(dy, saved, gamma)[0]
        want = _afresh(d_conv_t, x, w, attrs)
        with lt.profile() as p:
            dx, dw = lt.conv_grads(lt.cbr_bn_backward(dy, saved, gamma)[0], x, w, attrs, first_layer=first_layer)
        if call >= 4:                       # the forward replays from call 3, then conv_grads captures its own
            assert [r.kind for r in p.kernels] == ["graph"], [r.kind for r in p.kernels]
        assert (dx is None) == first_layer
        if not first_layer:
            np.testing.assert_array_equal(dx.numpy(), want[0])
        np.testing.assert_array_equal(dw.numpy(), want[1])
        del dx, dw
