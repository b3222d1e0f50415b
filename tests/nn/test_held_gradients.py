"""Gradients a user still holds keep their values when later steps write the parameters they read,
also when the forward they differentiate ran in an earlier plan (its saved statistics are read)."""
import numpy as np
import pytest

import lazytensor as lt


def _model(weights=None):
    model = lt.nn.Sequential(lt.nn.ConvBNReLU(3, 16), lt.nn.MaxPool2d(2), lt.nn.ConvBNReLU(16, 32),
                             lt.nn.GlobalAvgPool(), lt.nn.Linear(32, 10))
    if weights is not None:
        for p, w in zip(model.parameters(), weights):
            p[...] = w
    return model


@pytest.mark.parametrize("then", ["sgd", "train_step"])
def test_clipped_gradients_held_across_a_later_step(then):
    rng = np.random.default_rng(0)
    x = lt.asarray(rng.standard_normal((8, 32, 32, 3), dtype=np.float32))
    labels = lt.asarray(rng.integers(0, 10, 8))
    weights = [p.numpy() for p in _model().parameters()]

    twin = _model(weights)                  # the oracle: the same gradients, evaluated at once

    model = _model(weights)
    first = lt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss = lt.cross_entropy(model(x), labels)
    first.step(lt.grad(loss, model.parameters()))      # the user holds this loss on
    twin_first = lt.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
    twin_first.step(lt.grad(lt.cross_entropy(twin(x), labels), twin.parameters()))
    want = [t.numpy() for t in lt.evaluate(*lt.nn.utils.clip_grad_norm(
        lt.grad(lt.cross_entropy(twin(x), labels), twin.parameters()), 0.5)[0])]
    loss = lt.cross_entropy(model(x), labels)
    grads, norm = lt.nn.utils.clip_grad_norm(lt.grad(loss, model.parameters()), 0.5)
    lt.optim.LAMB(model.parameters(), lr=1e-2).step(grads)     # the forward runs in this step's plan
    opt = lt.optim.SGD(model.parameters(), lr=0.1)
    if then == "sgd":                       # writes the parameters the held gradients read
        opt.step(lt.grad(lt.cross_entropy(model(x), labels), model.parameters()))
    else:
        step = lt.train_step(model, lt.cross_entropy, opt)
        for _ in range(3):
            step(lt.asarray(rng.standard_normal((8, 32, 32, 3), dtype=np.float32)), labels)
    for g, w in zip(grads, want):
        np.testing.assert_allclose(lt.evaluate(g).numpy(), w, rtol=1e-5, atol=1e-7)
