"""An elementwise value that several steps' kernels read, and that reads many arrays, is evaluated
once into a temporary (lazytensor.plan.shared_values); a narrow one is recomputed in each kernel.
Either way the values are NumPy's."""
from __future__ import annotations

import numpy as np
import pytest

import lazytensor as lt

ONCE = "evaluated once into a temporary"


def _arrays(n, count, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(np.float32) for _ in range(count)]


def test_a_wide_value_read_by_three_kernels_is_evaluated_once():
    a, b, c, d, e = _arrays(1000, 5)
    ta, tb, tc, td, te = (lt.asarray(v) for v in (a, b, c, d, e))
    v = ta * tb + tc * td + te                       # five arrays
    y = v * 2 + v.sum() + (v * ta).sum()             # read by two reductions and the final kernel
    explanation = lt.explain(y)
    assert str(explanation).count(ONCE) == 1
    with lt.profile() as p:
        got = np.asarray(lt.evaluate(y))
    assert len(p.kernels) == 4                       # the value, two reductions, the final kernel
    w = a * b + c * d + e
    np.testing.assert_allclose(got, w * 2 + w.sum(dtype=np.float64) + (w * a).sum(dtype=np.float64), rtol=1e-5, atol=1e-4)


def test_a_narrow_shared_value_is_recomputed_in_each_kernel():
    a, b = _arrays(1000, 2)
    ta, tb = lt.asarray(a), lt.asarray(b)
    v = ta * tb                                      # two arrays: three kernels re-reading them is cheaper
    y = v * 2 + v.sum() + (v * ta).sum()
    assert ONCE not in str(lt.explain(y))
    np.testing.assert_allclose(np.asarray(y), a * b * 2 + (a * b).sum(dtype=np.float64) + (a * b * a).sum(dtype=np.float64),
                               rtol=1e-5, atol=1e-4)


def test_results_of_one_shape_are_one_kernel_not_several_readers():
    """Several results of one shape are one kernel with several outputs: a value they share is not
    'read by several kernels'."""
    a, b, c, d, e = (lt.asarray(v) for v in _arrays(64, 5, seed=1))
    v = a * b + c * d + e
    text = str(lt.explain([v + 1, v * 2, v - 3]))
    assert ONCE not in text


@pytest.mark.parametrize("seed", range(3))
def test_several_results_with_a_value_evaluated_once_match_numpy(seed):
    xs = _arrays(300, 6, seed)
    ts = [lt.asarray(x) for x in xs]
    v = ts[0] * ts[1] - ts[2] * ts[3] + ts[4] / (abs(ts[5]) + 1)
    outs = [lt.empty((300,), np.float32), lt.empty((), np.float32), lt.empty((), np.float32)]
    text = str(lt.explain([v * v.max(), (v * ts[0]).sum(), v.mean()]))
    assert ONCE in text
    lt.assign([(outs[0], v * v.max()), (outs[1], (v * ts[0]).sum()), (outs[2], v.mean())])
    w = xs[0] * xs[1] - xs[2] * xs[3] + xs[4] / (np.abs(xs[5]) + 1)
    np.testing.assert_allclose(np.asarray(outs[0]), w * w.max(), rtol=1e-5)
    np.testing.assert_allclose(float(np.asarray(outs[1])), (w * xs[0]).sum(), rtol=1e-4)
    np.testing.assert_allclose(float(np.asarray(outs[2])), w.mean(), rtol=1e-4, atol=1e-6)


def _stacked_blocks(seed=0, dtype=np.float32, classes=5):
    """A stem and three BasicBlocks: each block's output relu is read by the next block's conv, its
    skip and the backward, and the gradient down the stage sums every block's."""
    rng = np.random.default_rng(seed)
    return lt.nn.Sequential(lt.nn.Conv2d(3, 8, 3, padding=1, bias=False, dtype=dtype, rng=rng), lt.nn.BatchNorm2d(8),
                            lt.nn.ReLU(), lt.nn.BasicBlock(8, 8, 1, dtype=dtype, rng=rng),
                            lt.nn.BasicBlock(8, 8, 1, dtype=dtype, rng=rng), lt.nn.BasicBlock(8, 16, 2, dtype=dtype, rng=rng),
                            lt.nn.GlobalAvgPool(), lt.nn.Linear(16, classes, dtype=dtype, rng=rng))


def _losses(data, monkeypatch=None):
    model = _stacked_blocks()
    step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    if monkeypatch is not None:         # lt.grad's per-op rules, without the fused CBR backward
        from lazytensor.autodiff import patterns
        monkeypatch.setattr(patterns, "BACKWARD_PATTERNS", [])
    losses = [float(step(x, y).numpy()) for x, y in data]
    return step, model, losses


def test_a_relu_evaluated_once_still_gives_the_fused_backward_its_mask(monkeypatch):
    """A block's output relu evaluated once into a temporary is the value whose writer takes the 1-bit
    mask the fused CBR backward reads; the step equals the per-op rules' step."""
    rng = np.random.default_rng(3)
    data = [(rng.standard_normal((4, 8, 8, 3)).astype(np.float32), rng.integers(0, 5, 4)) for _ in range(3)]
    step, model, losses = _losses(data)
    text = str(lt.explain(step, source=False, detail=True))
    assert ONCE in text
    assert "backward: 8 of 8 Conv-BN blocks take the fused CBR backward" in text
    _, reference, want = _losses(data, monkeypatch)
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    for (name, a), (_, b) in zip(model.state_dict().items(), reference.state_dict().items()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=name)
