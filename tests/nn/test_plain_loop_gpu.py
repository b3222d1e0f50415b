"""The plain training loop on CUDA, `opt.step(lt.grad(loss, params))` written anew each step,
replays ONE CUDA graph per step once its structure and addresses repeat, with the bits of the
same loop run step by step."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.reuse import replay

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")]


def _net(seed=0):
    rng = np.random.default_rng(seed)
    return lt.nn.Sequential(lt.nn.Conv2d(3, 8, 3, padding=1, bias=False, device="cuda", rng=rng),
                            lt.nn.BatchNorm2d(8, device="cuda"), lt.nn.ReLU(), lt.nn.MaxPool2d(2), lt.nn.Flatten(),
                            lt.nn.Linear(8 * 4 * 4, 5, device="cuda", rng=rng))


def _loop(steps, launches):
    rng = np.random.default_rng(1)
    x = lt.asarray(rng.standard_normal((16, 8, 8, 3)).astype(np.float32), device="cuda")
    labels = lt.asarray(rng.integers(0, 5, 16), device="cuda")
    model = _net()
    params = list(model.parameters())
    opt = lt.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-3)
    losses = []
    for _ in range(steps):
        with lt.profile() as p:
            loss = lt.cross_entropy(model(x), labels)
            opt.step(lt.grad(loss, params))
        launches.append(p.launches)
        losses.append(loss)                 # held: it keeps the value it had before the step
    return [float(v) for v in losses], [np.array(a) for a in model.state_dict().values()]


def test_the_plain_loop_replays_one_graph_per_step_with_the_same_bits(monkeypatch):
    lt.release_graphs()
    launches = []
    losses, state = _loop(8, launches)
    assert launches[-3:] == [1, 1, 1], launches
    monkeypatch.setattr(replay, "ENABLED", False)
    step_by_step = []
    want_losses, want_state = _loop(8, step_by_step)
    assert min(step_by_step) > 1
    np.testing.assert_array_equal(losses, want_losses)
    for a, b in zip(state, want_state):
        np.testing.assert_array_equal(a, b)
