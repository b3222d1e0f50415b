"""LARS and LAMB over parameter regions (every parameter's norms from one segmented sum): their rules
in float64 NumPy over 20 steps on drawn parameter shapes (0-d ones too, zero gradients and zero
weights whose norms are 0), the region updates equal to the per-parameter updates bit for bit, and
as many launches per step for 16 parameters of distinct shapes as for 16 of shared shapes."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.nn.optim import LAMB, LARS
from tests.nn.test_optim_layerwise import lamb_reference, lars_reference

shapes = st.lists(st.sampled_from([(), (1,), (3,), (4, 5), (2, 1, 3), (70,)]), min_size=1, max_size=5)
rules = st.sampled_from([
    ("LARS", dict(lr=0.1, momentum=0.9, weight_decay=0.0, trust_coefficient=0.02)),
    ("LARS", dict(lr=0.05, momentum=0.0, weight_decay=1e-2, trust_coefficient=0.001)),
    ("LAMB", dict(lr=0.01, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0)),
    ("LAMB", dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-2)),
])


def _reference(name, kw, w, grads):
    if name == "LARS":
        return lars_reference(w, grads, kw["lr"], kw["momentum"], kw["weight_decay"], kw["trust_coefficient"])
    return lamb_reference(w, grads, kw["lr"], *kw["betas"], kw["eps"], kw["weight_decay"])


def _problem(shapes, zero, seed, steps=20):
    """Weights and 20 steps of gradients; `zero[i]` 1: parameter i's gradients are all 0, 2: its
    weights start at 0."""
    rng = np.random.default_rng(seed)
    w0 = [np.asarray(rng.standard_normal(s)) for s in shapes]
    grads = [[np.asarray(rng.standard_normal(s)) for s in shapes] for _ in range(steps)]
    for i, z in enumerate(zero[:len(shapes)]):
        if z == 1:
            for g in grads:
                g[i] = np.zeros_like(g[i])
        elif z == 2:
            w0[i] = np.zeros_like(w0[i])
    return w0, grads


def _run(name, kw, w0, grads, regions):
    params = [lt.asarray(w.copy()) for w in w0]
    opt = getattr(lt.optim, name)(params, regions=regions, **kw)
    assert opt.regions == regions
    for step in grads:
        opt.step([lt.asarray(g) + 0.0 for g in step])      # lazy: written into the region's gradients
    return [p.numpy() for p in params]


@settings(max_examples=12, deadline=None)
@given(shapes=shapes, rule=rules, zero=st.lists(st.integers(0, 2), min_size=5, max_size=5), seed=st.integers(0, 99))
def test_lars_and_lamb_follow_their_float64_rules_over_regions_and_per_parameter(shapes, rule, zero, seed):
    name, kw = rule
    w0, grads = _problem(shapes, zero, seed)
    over_regions = _run(name, kw, w0, grads, True)
    per_parameter = _run(name, kw, w0, grads, False)
    for i, w in enumerate(w0):
        want = _reference(name, kw, w, [g[i] for g in grads])
        np.testing.assert_allclose(over_regions[i], want, rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(over_regions[i], per_parameter[i])     # the same sums, the same bits


def _mlp(widths, seed=0):
    layers = []
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [lt.nn.Linear(a, b), lt.nn.ReLU()]
    model = lt.nn.Sequential(*layers[:-1])
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p[...] = (rng.standard_normal(p.shape) * 0.5).astype(np.float32)
    return model


@pytest.mark.parametrize("cls, kw", [(LARS, dict(lr=0.1, weight_decay=1e-4)), (LAMB, dict(lr=0.01, weight_decay=0.01))],
                         ids=["LARS", "LAMB"])
def test_recorded_steps_over_regions_equal_the_per_parameter_steps(cls, kw):
    """lt.train_step of a float32 MLP: region and per-parameter updates give the same bits."""
    rng = np.random.default_rng(3)
    x, y = lt.asarray(rng.standard_normal((8, 5)).astype(np.float32)), lt.asarray(rng.integers(0, 3, 8))
    models = []
    for regions in (True, False):
        model = _mlp([5, 7, 4, 3])
        opt = cls(model.parameters(), regions=regions, **kw)
        assert opt.regions == regions
        step = lt.train_step(model, lt.cross_entropy, opt)
        for _ in range(4):
            step(x, y)
        models.append(model)
    for a, b in zip(*(m.parameters() for m in models)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


OPTIMIZERS = {
    "SGD": (lambda ps: lt.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=5e-4), None),
    "AdamW": (lambda ps: lt.optim.AdamW(ps, lr=1e-3), None),
    "LARS": (lambda ps: LARS(ps, lr=0.1, weight_decay=1e-4), None),
    "LAMB": (lambda ps: LAMB(ps, lr=1e-3, weight_decay=0.01), None),
    "SGD, clipped": (lambda ps: lt.optim.SGD(ps, lr=0.05, momentum=0.9), 1.0),
    "LAMB, clipped": (lambda ps: LAMB(ps, lr=1e-3), 1.0),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_distinct_shapes_launch_no_more_kernels_than_shared_shapes(name):
    """16 parameters of 16 shapes: as many steps and launches per call as 16 of 2 shapes."""
    make, clip = OPTIMIZERS[name]
    rng = np.random.default_rng(0)
    counts = []
    for widths in ([4, 5, 6, 7, 8, 9, 10, 11, 12], [8] * 9):
        model = _mlp(widths)
        assert len({p.shape for p in model.parameters()}) == (16 if widths[0] == 4 else 2)
        opt = make(model.parameters())
        assert opt.regions
        step = lt.train_step(model, lt.cross_entropy, opt, max_grad_norm=clip)
        x = lt.asarray(rng.standard_normal((6, widths[0])).astype(np.float32))
        y = lt.asarray(rng.integers(0, widths[-1], 6))
        step(x, y)
        with lt.profile() as p:
            step(x, y)
        counts.append((len(step.last.plan.steps), len(p.kernels)))
    assert counts[0][0] <= counts[1][0] and counts[0][1] <= counts[1][1], counts


@pytest.mark.parametrize("cls", [LARS, LAMB])
def test_regions_asked_for_where_the_backend_has_no_segmented_sums_is_an_error(cls, monkeypatch):
    from lazytensor.kernels.cpu.backend import CpuBackend
    monkeypatch.setattr(CpuBackend, "segmented_sums", False)
    params = [lt.asarray(np.ones((3, 2), np.float32)), lt.asarray(np.ones(4, np.float32))]
    with pytest.raises(ValueError, match="segmented sums"):
        cls(params, lr=0.1, regions=True)
    assert not cls(params, lr=0.1).regions           # unset: each parameter on its own, as before
