"""A kept value's origin (what lt.grad through it would read) lets go of its operands once a write
makes it stale: a training loop that keeps each step's loss does not keep each step's forward alive,
nor compute it again as a live reader of the parameters on the next step."""
import gc

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.assign import reader_memory


def _loop(steps, hold, seen):
    rng = np.random.default_rng(0)
    x = lt.asarray(rng.standard_normal((7, 5)).astype(np.float32), device="cpu")
    labels = lt.asarray(rng.integers(0, 3, 7), device="cpu")
    model = lt.nn.Sequential(lt.nn.Linear(5, 4, rng=rng), lt.nn.ReLU(), lt.nn.Linear(4, 3, rng=rng))
    params = list(model.parameters())
    opt = lt.optim.SGD(params, lr=0.1, momentum=0.9)
    losses = []
    for _ in range(steps):
        loss = lt.cross_entropy(model(x), labels)
        opt.step(lt.grad(loss, params))
        losses.append(loss if hold else float(loss))
        gc.collect()
    return [float(v) for v in losses], (losses, params)


@pytest.fixture
def readers_per_step(monkeypatch):
    seen = []
    real = reader_memory.memory_for

    def counting(readers):
        seen.append(len(readers))
        return real(readers)
    monkeypatch.setattr(reader_memory, "memory_for", counting)
    return seen


def test_kept_losses_keep_their_values_and_add_no_readers(readers_per_step):
    free, _ = _loop(5, False, readers_per_step)
    alone = list(readers_per_step)
    readers_per_step.clear()
    held, _ = _loop(5, True, readers_per_step)
    assert held == free                                   # the same values, bit for bit
    assert readers_per_step == alone, (readers_per_step, alone)


def test_an_origin_not_yet_stale_keeps_its_operands():
    w = lt.asarray(np.arange(4, dtype=np.float64), device="cpu")
    other = lt.zeros(4, np.float64, "cpu")
    y = lt.sum(w * w)
    lt.evaluate(y)
    other[...] = 1.0                                      # a write elsewhere: y's origin is still good
    assert y.origin.args != ()
    np.testing.assert_allclose(lt.evaluate(lt.grad(y, w)).numpy(), 2 * np.arange(4))
