"""Parameters in regions (lazytensor.nn.regions): the layout, and updates over regions equal to the
per-parameter updates bit for bit and to the rules written out in float64 NumPy."""
import numpy as np
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.nn.regions import ALIGNMENT
from lazytensor.step.segments import keys


def _mlp(widths, dtype=np.float32, seed=0):
    layers = []
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [lt.nn.Linear(a, b, dtype=dtype), lt.nn.ReLU()]
    model = lt.nn.Sequential(*layers[:-1])
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p[...] = (rng.standard_normal(p.shape) * 0.5).astype(dtype)
    return model


def test_parameters_become_aligned_views_of_one_buffer_keeping_their_values():
    model = _mlp([5, 7, 3])
    params = model.parameters()
    before = [p.numpy().copy() for p in params]
    opt = lt.optim.SGD(params, lr=0.1)
    assert opt.regions and len(opt.units) == 1
    region = opt.units[0].region
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]
    flat = region.flat.numpy()
    for p, start, want in zip(params, region.starts, before):
        np.testing.assert_array_equal(p.numpy(), want)
        assert (p.data.ctypes.data - region.flat.data.ctypes.data) % ALIGNMENT == 0
        np.testing.assert_array_equal(flat[start:start + p.size], want.ravel())
    used = np.zeros(flat.size, bool)
    for p, start in zip(params, region.starts):
        used[start:start + p.size] = True
    assert not flat[~used].any()            # the bytes between segments are zero


def test_one_region_per_dtype_and_views_are_not_moved():
    a, b = lt.asarray(np.ones(3, np.float32)), lt.asarray(np.ones(4))
    opt = lt.optim.AdamW([a, b, lt.asarray(np.zeros(2, np.float32))])
    assert [u.region.dtype for u in opt.units] == [np.float32, np.float64]
    base = lt.asarray(np.ones(6))
    view = base[2:]
    assert not lt.optim.SGD([view], lr=0.1).regions      # a view of another tensor stays where it is
    assert not lt.optim.SGD([a, a], lr=0.1).regions      # a parameter listed twice


def test_step_order_counts_the_segments_a_step_reaches():
    region = lt.nn.regions.Region([lt.asarray(np.ones(3)), lt.asarray(np.ones(70))])
    g = region.like(np.dtype(np.float64))
    s0, s1 = region.starts
    assert keys(g.data[s0:s0 + 3]) == [(keys(g.data)[0][0], 0)]
    assert keys(g.data[s1:s1 + 70]) == [(keys(g.data)[0][0], 1)]
    assert len(keys(g.data)) == 2


optimizers = st.sampled_from([
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("SGD", dict(lr=0.1, momentum=0.8, dampening=0.2, weight_decay=1e-2)),
    ("AdamW", dict(lr=1e-2)),
    ("AdamW", dict(lr=1e-2, weight_decay=0.1, betas=(0.8, 0.9))),
])


def _opt(name, params, kw, regions):
    return getattr(lt.optim, name)(params, regions=regions, **kw)


@settings(max_examples=12, deadline=None)
@given(widths=st.lists(st.integers(1, 9), min_size=2, max_size=5), which=optimizers, seed=st.integers(0, 50),
       recorded=st.booleans())
def test_updates_over_regions_equal_the_per_parameter_updates(widths, which, seed, recorded):
    name, kw = which
    rng = np.random.default_rng(seed)
    x = lt.asarray(rng.standard_normal((6, widths[0])).astype(np.float32))
    y = lt.asarray(rng.integers(0, widths[-1], 6))
    got = []
    for regions in (False, True):
        model = _mlp(widths, seed=seed)
        opt = _opt(name, model.parameters(), kw, regions)
        assert opt.regions == regions
        if recorded:
            step = lt.train_step(model, lt.cross_entropy, opt)
            for _ in range(3):
                step(x, y)
        else:
            for _ in range(3):
                opt.step(lt.grad(lt.cross_entropy(model(x), y), model.parameters()))
        got.append([p.numpy() for p in model.parameters()] + [t.numpy() for t in opt.master if t is not None])
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)


def _reference(name, kw, w, grads):
    """The update rule in float64 NumPy, as torch.optim writes it."""
    w = w.copy()
    lr, mom, damp = kw["lr"], kw.get("momentum", 0.0), kw.get("dampening", 0.0)
    wd = kw.get("weight_decay", 0.0 if name == "SGD" else 1e-2)
    b1, b2 = kw.get("betas", (0.9, 0.999))
    buf = m = v = None
    for t, g in enumerate(grads, 1):
        if name == "SGD":
            g = g + wd * w
            if mom:
                buf = g.copy() if buf is None else mom * buf + (1 - damp) * g
                g = g + mom * buf if kw.get("nesterov") else buf
            w = w - lr * g
        else:
            m = (1 - b1) * g if m is None else b1 * m + (1 - b1) * g
            v = (1 - b2) * g * g if v is None else b2 * v + (1 - b2) * g * g
            w = w * (1 - lr * wd)
            w = w - lr / (1 - b1 ** t) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + 1e-8)
    return w


@settings(max_examples=10, deadline=None)
@given(shapes=st.lists(st.sampled_from([(3,), (4, 5), (2, 1, 3), (1,), (40,)]), min_size=1, max_size=4),
       which=optimizers, seed=st.integers(0, 99))
def test_updates_over_regions_follow_the_float64_rule(shapes, which, seed):
    name, kw = which
    rng = np.random.default_rng(seed)
    w0 = [rng.standard_normal(s) for s in shapes]
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(5)]
    params = [lt.asarray(w.copy()) for w in w0]
    opt = _opt(name, params, kw, True)
    assert opt.regions
    for step in grads:
        opt.step([lt.asarray(g) for g in step])
    for i, p in enumerate(params):
        np.testing.assert_allclose(p.numpy(), _reference(name, kw, w0[i], [g[i] for g in grads]), rtol=1e-12,
                                   atol=1e-14)


def test_the_update_is_one_kernel_whatever_the_shapes():
    """16 parameters of distinct shapes take as many steps as 16 of one shape."""
    rng = np.random.default_rng(0)
    counts = []
    for widths in ([4, 5, 6, 7, 8, 9, 10, 11, 12], [8] * 9):
        model = _mlp(widths)
        assert len({p.shape for p in model.parameters()}) == (16 if widths[0] == 4 else 2)
        step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
        x = lt.asarray(rng.standard_normal((6, widths[0])).astype(np.float32))
        step(x, lt.asarray(rng.integers(0, widths[-1], 6)))
        counts.append(len(step.last.plan.steps))
    assert counts[0] == counts[1]


def test_weight_gradients_still_move_up_beside_their_dgrads():
    """Every weight gradient writes the one gradient region; step order counts the segments each
    step reaches (lazytensor.step.segments), so wgrads still move up beside their dgrads and the
    arena is no larger than the per-parameter step's (where the gradients were temporaries in it)."""
    from tests.step.test_memory_plan import resnet_like
    rng = np.random.default_rng(1)
    x = lt.asarray(rng.standard_normal((32, 8, 8, 3)).astype(np.float32))
    y = lt.asarray(rng.integers(0, 4, 32))
    memory = {}
    for regions in (False, True):
        model = resnet_like()
        step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9,
                                                                    regions=regions))
        step(x, y)
        memory[regions] = step.last.plan.memory
    assert memory[True].moved > 0
    assert memory[True].arena <= memory[False].arena


def test_a_second_optimizer_shares_the_regions_or_leaves_them():
    model = _mlp([5, 7, 3])
    first = lt.optim.SGD(model.parameters(), lr=0.1)
    second = lt.optim.AdamW(model.parameters())
    assert second.regions and second.units[0].region is first.units[0].region
    part = lt.optim.SGD(model.parameters()[:2], lr=0.1)      # some of a region's parameters: left in place
    assert not part.regions
    rng = np.random.default_rng(0)
    grads = [lt.asarray(rng.standard_normal(p.shape).astype(np.float32)) for p in model.parameters()]
    want = [p.numpy() - 0.1 * g.numpy() for p, g in zip(model.parameters(), grads)]
    first.step([g + 0 for g in grads])      # lazy gradients: the region's update
    for p, w in zip(model.parameters(), want):
        np.testing.assert_array_equal(p.numpy(), w)
