"""lt.train_step(amp=True): float16 compute, float32 master weights, dynamic loss scaling decided on
the device. An overflow (injected: a scale too large for float16 gradients, or an inf in the input)
skips the step: parameters, master weights, moments and the step count keep their values, the scale
is halved; good steps grow it."""
import numpy as np
import pytest

import lazytensor as lt

from tests.nn.test_train_step import batches, conv_net, mlp

pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning",
                                        "ignore:overflow encountered:RuntimeWarning")


def amp_step(net, seed=3, regions=True, **scaler):
    model = net(seed=seed, dtype=np.float16)
    opt = lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, regions=regions)
    amp = lt.nn.LossScaler(**scaler) if scaler else True
    return model, opt, lt.train_step(model, lt.cross_entropy, opt, amp=amp)


def state(model, opt):
    return [t.numpy().copy() for t in (*model.parameters(), *[m for m in opt.master if m is not None],
                                       *[b for b in opt.buffers if b is not None], opt.taken)]


@pytest.mark.parametrize("net", [mlp, conv_net])
def test_amp_trains_and_tracks_float32(net):
    data = batches(2, seed=4, batch=8)
    model, opt, step = amp_step(net)
    assert {p.dtype for p in model.parameters()} == {np.dtype(np.float16)} | (
        {np.dtype(np.float32)} if net is conv_net else set())          # BatchNorm stays float32
    losses = [float(step(*data[k % 2]).numpy()) for k in range(8)]
    reference = net(seed=3)
    ref_step = lt.train_step(reference, lt.cross_entropy, lt.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9))
    want = [float(ref_step(*data[k % 2]).numpy()) for k in range(8)]
    np.testing.assert_allclose(losses, want, rtol=5e-2, atol=5e-3)
    assert np.mean(losses[-2:]) < 0.5 * np.mean(losses[:2])
    assert not step.scaler.found_inf.numpy() and int(opt.taken.numpy()) == 8
    assert step.last.x.dtype == np.float16
    assert "amp: on, float16 activations and weights" in lt.explain(step, source=False)


@pytest.mark.parametrize("net", [mlp, conv_net])
def test_an_overflow_skips_the_step_and_halves_the_scale(net):
    data = batches(3, seed=5, batch=8)
    model, opt, step = amp_step(net)
    step(*data[0])
    step.scaler.scale[...] = 2.0 ** 40            # float16 gradients overflow at this scale
    before = state(model, opt)
    step(*data[1])
    assert step.scaler.found_inf.numpy()
    for a, b in zip(before, state(model, opt)):
        np.testing.assert_array_equal(a, b)
    assert step.scaler.scale.numpy() == 2.0 ** 39 and step.scaler.good_steps.numpy() == 0
    for _ in range(40):                            # halved until the gradients fit, then the steps go on
        step(*data[2])
        if not step.scaler.found_inf.numpy():
            break
    assert not step.scaler.found_inf.numpy() and int(opt.taken.numpy()) == 2
    assert any(not np.array_equal(a, b) for a, b in zip(before, state(model, opt)))


def test_an_inf_in_the_input_skips_the_step():
    model, opt, step = amp_step(mlp)
    (x, y), = batches(1, seed=6, batch=8)
    step(x, y)
    before = state(model, opt)
    bad = x.copy()
    bad[3, 2, 1, 0] = np.inf
    loss = step(bad, y)
    assert not np.isfinite(loss.numpy()) and step.scaler.found_inf.numpy()
    for a, b in zip(before, state(model, opt)):
        np.testing.assert_array_equal(a, b)
    step(x, y)
    assert not step.scaler.found_inf.numpy() and int(opt.taken.numpy()) == 2


def test_the_scale_grows_after_good_steps():
    model, opt, step = amp_step(mlp, init_scale=256.0, growth_interval=2)
    (x, y), = batches(1, seed=7, batch=8)
    scales = []
    for _ in range(5):
        step(x, y)
        scales.append(float(step.scaler.scale.numpy()))
    assert scales == [256.0, 512.0, 512.0, 1024.0, 1024.0]


def test_amp_needs_a_float16_model():
    model = mlp()
    with pytest.raises(ValueError, match="dtype=np.float16"):
        lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.1), amp=True)
    with pytest.raises(ValueError, match="growth_factor > 1"):
        lt.nn.LossScaler(growth_factor=0.5)


@pytest.mark.parametrize("regions", [False, True])
def test_found_inf_is_one_reduction_per_gradient_shape_or_region(regions):
    # conv_net's gradients: the conv weight, BatchNorm's gamma and beta (one shape), the Linear's
    # weight and bias: 5 gradients, 4 shapes, so 4 `any` reductions, not 5; over regions, one per
    # region: float16 (the conv and the Linear) and float32 (BatchNorm)
    model, opt, step = amp_step(conv_net, regions=regions)
    step(*batches(1, batch=8)[0])
    shapes = {tuple(p.shape) for p in model.parameters()}
    assert len(model.parameters()) == 5 and len(shapes) == 4
    described = [s.describe(source=False) for s in step.last.plan.steps]
    want = 2 if regions else len(shapes)
    assert len(opt.units) == (2 if regions else 5)
    assert sum(d.startswith("FusedReduction") and " any over " in d for d in described) == want
