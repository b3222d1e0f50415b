"""The plain loop a user writes first, `opt.step(lt.grad(lt.cross_entropy(model(x), y), params))`,
computes what lt.train_step computes: the same losses, weights and BatchNorm running statistics, bit
for bit, over 10 steps of a convolutional network on the CPU (tests/nn/test_plain_loop_gpu.py on
CUDA; tests/nn/test_mlp_step.py for an MLP)."""
import numpy as np

import lazytensor as lt
from lazytensor.train.data import SyntheticBatches
from lazytensor.train.models import build_model


def _run(plain: bool):
    model = build_model("small_vgg", 16, 10, dtype=np.float32, device="cpu")
    x, y = SyntheticBatches(4, 16, 10, "cpu", count=1).batches[0]
    params = list(model.parameters())
    opt = lt.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=5e-4)
    step = None if plain else lt.train_step(model, lt.cross_entropy, opt)
    losses = []
    for _ in range(10):
        if plain:
            loss = lt.cross_entropy(model(x), y)
            opt.step(lt.grad(loss, params))
            losses.append(float(loss))
        else:
            losses.append(float(step(x, y)))
    return losses, {k: np.array(v) for k, v in model.state_dict().items()}


def test_the_plain_loop_is_train_steps_step_bit_for_bit():
    plain_losses, plain_state = _run(True)
    step_losses, step_state = _run(False)
    assert plain_losses == step_losses
    assert plain_losses[-1] < plain_losses[0]           # (it trains)
    assert plain_state.keys() == step_state.keys()
    for name in plain_state:
        np.testing.assert_array_equal(plain_state[name], step_state[name], err_msg=name)
