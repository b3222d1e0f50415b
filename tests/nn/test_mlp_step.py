"""One MLP training step (forward, lt.grad, SGD update) as one plan: the optimizer assigns every
parameter at once, so the forward and backward the gradients share run once (8 matmuls for three
layers: 3 forward, 2 data gradients, 3 weight gradients), with values against a float64 NumPy
reference of the same step."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt


def _reference_step(x, labels, weights, biases, lr):
    """PyTorch's Linear/ReLU/cross_entropy/SGD step written out in float64 NumPy."""
    hs, zs = [x], []
    for k, (w, b) in enumerate(zip(weights, biases)):
        z = hs[-1] @ w.T + b
        zs.append(z)
        if k < len(weights) - 1:
            hs.append(np.maximum(z, 0))
    logits = zs[-1]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    g = p.copy()
    g[np.arange(len(labels)), labels] -= 1
    g /= len(labels)
    new_w, new_b = [None] * len(weights), [None] * len(weights)
    for k in reversed(range(len(weights))):
        new_w[k] = weights[k] - lr * (g.T @ hs[k])
        new_b[k] = biases[k] - lr * g.sum(axis=0)
        if k:
            g = (g @ weights[k]) * (zs[k - 1] > 0)
    return new_w, new_b


def _mlp(dims, batch, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, dims[0]))
    labels = rng.integers(0, dims[-1], batch)
    layers = [lt.nn.Linear(i, o, dtype=dtype, rng=rng) for i, o in zip(dims, dims[1:])]
    return x, labels, layers


def _step(x, labels, layers, opt):
    h = x
    for layer in layers[:-1]:
        h = lt.relu(layer(h))
    loss = lt.cross_entropy(layers[-1](h), labels)
    params = [p for layer in layers for p in layer.parameters()]
    opt.step(lt.grad(loss, params))


@settings(max_examples=8, deadline=None)
@given(dims=st.lists(st.integers(1, 9), min_size=3, max_size=4), batch=st.integers(1, 7), seed=st.integers(0, 99))
def test_mlp_steps_match_numpy(dims, batch, seed):
    x, labels, layers = _mlp(dims, batch, seed)
    weights = [layer.weight.numpy() for layer in layers]
    biases = [layer.bias.numpy() for layer in layers]
    tx, tl = lt.asarray(x), lt.asarray(labels)
    params = [p for layer in layers for p in layer.parameters()]
    opt = lt.nn.SGD(params, lr=0.1)
    for _ in range(3):          # the same plan again over the updated parameters
        weights, biases = _reference_step(x, labels, weights, biases, 0.1)
        _step(tx, tl, layers, opt)
        for layer, w, b in zip(layers, weights, biases):
            np.testing.assert_allclose(layer.weight.numpy(), w, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(layer.bias.numpy(), b, rtol=1e-10, atol=1e-12)


def test_a_step_runs_each_matmul_once():
    x, labels, layers = _mlp((13, 11, 9, 5), 17, 0, np.float32)
    tx, tl = lt.asarray(x.astype(np.float32)), lt.asarray(labels)
    opt = lt.nn.SGD([p for layer in layers for p in layer.parameters()], lr=0.1, momentum=0.9)
    for _ in range(2):
        with lt.profile() as p:
            _step(tx, tl, layers, opt)
        kinds = [k.kind for k in p.kernels]
        assert kinds.count("matmul") == 8, kinds


def test_an_expression_several_heavy_steps_read_is_evaluated_once():
    """The forward activations (read by the next matmul and, transposed, by the weight gradient) and
    each layer's pre-activation gradient (read by both backward matmuls and the bias gradient's
    reduction) are each evaluated once; the reductions read them."""
    x, labels, layers = _mlp((13, 11, 9, 5), 17, 0, np.float32)
    tx, tl = lt.asarray(x.astype(np.float32)), lt.asarray(labels)
    h = tx
    for layer in layers[:-1]:
        h = lt.relu(layer(h))
    loss = lt.cross_entropy(layers[-1](h), tl)
    grads = lt.grad(loss, [p for layer in layers for p in layer.parameters()])
    text = str(lt.explain(list(grads), source=False, detail=True))
    steps = [line for line in text.splitlines() if line.startswith("[")]
    elementwise = [s for s in steps if "FusedElementwise on" in s]
    assert sum("187 elements" in s for s in elementwise) == 2, text       # h1, and dz1
    assert sum("153 elements" in s for s in elementwise) == 2, text       # h2, and dz2
    reductions = [s for s in steps if "FusedReduction" in s and "over axes (0,)" in s]
    assert len(reductions) == 3 and all(s.endswith("1 array inputs") for s in reductions), reductions
    values = lt.evaluate(*grads)
    weights = [layer.weight.numpy().astype(np.float64) for layer in layers]
    biases = [layer.bias.numpy().astype(np.float64) for layer in layers]
    new_w, new_b = _reference_step(x.astype(np.float32).astype(np.float64), labels, weights, biases, 1.0)
    want = [v for w, b, nw, nb in zip(weights, biases, new_w, new_b) for v in (w - nw, b - nb)]
    for got, w in zip(values, want):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("make", [lambda ps: lt.nn.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
                                  lambda ps: lt.nn.AdamW(ps, lr=0.01)])
def test_one_assignment_of_every_parameter_gives_each_parameters_own_update(make):
    """Parameters of several shapes and dtypes (float16 with a float32 master) updated by one
    assignment: each gets what an optimizer of its own gives it."""
    rng = np.random.default_rng(3)
    shapes = [((4, 3), np.float32), ((3,), np.float16), ((2, 5), np.float16), ((4, 3), np.float64)]
    values = [rng.standard_normal(s).astype(d) for s, d in shapes]
    grads = [[rng.standard_normal(s).astype(d) for s, d in shapes] for _ in range(3)]
    together = [lt.asarray(v.copy()) for v in values]
    alone = [lt.asarray(v.copy()) for v in values]
    opt = make(together)
    opts = [make([p]) for p in alone]
    for gs in grads:
        with lt.profile() as p:
            opt.step([lt.asarray(g) for g in gs])
        assert len(p.kernels) == 4          # one kernel per shape: (4, 3) twice, (3,), (2, 5), and () the step count
        for o, q, g in zip(opts, alone, gs):
            o.step([lt.asarray(g)])
    for a, b in zip(together, alone):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@settings(max_examples=10, deadline=None)
@given(batch=st.sampled_from([(), (3,), (2, 1)]), m=st.integers(1, 6), k=st.integers(1, 5), n=st.integers(1, 6),
       seed=st.integers(0, 99))
def test_a_transposed_product_is_computed_transposed(batch, m, k, n, seed):
    """(a @ b).T, as a weight gradient of x @ w.T is: the product is written transposed into a
    temporary of the view's layout (no transposed copy), and what reads it gets NumPy's values."""
    rng = np.random.default_rng(seed)
    a, b, c = rng.standard_normal((*batch, m, k)), rng.standard_normal((k, n)), rng.standard_normal(m)
    e = lt.swapaxes(lt.asarray(a) @ lt.asarray(b), -1, -2) * 2.0 + lt.asarray(c)
    text = str(lt.explain(e, source=False))
    assert text.count("Matmul on cpu") == 1 and "computed transposed, as it is read" in text, text
    assert "materialized into a temporary for a view" not in text
    np.testing.assert_allclose(lt.evaluate(e).numpy(), np.swapaxes(a @ b, -1, -2) * 2 + c, rtol=1e-12, atol=1e-12)


def test_weight_gradients_shared_by_two_results_are_computed_transposed():
    """The gradients held by the caller and the updates that read them (the optimizer's step): each
    weight gradient's matmul runs once, computed transposed, as both read it."""
    x, labels, layers = _mlp((13, 11, 9, 5), 17, 0, np.float32)
    tx, tl = lt.asarray(x.astype(np.float32)), lt.asarray(labels)
    params = [p for layer in layers for p in layer.parameters()]
    h = tx
    for layer in layers[:-1]:
        h = lt.relu(layer(h))
    grads = lt.grad(lt.cross_entropy(layers[-1](h), tl), params)
    pairs = [(lt.empty(g.shape), g) for g in grads] + [(p, p - 0.1 * g) for p, g in zip(params, grads)]
    text = str(lt.explain(pairs, source=False, detail=True))
    assert text.count("Matmul on cpu") == 8 and text.count("computed transposed, as it is read") == 3, text
    want = [p.numpy() - 0.1 * g.numpy() for p, g in zip(params, lt.evaluate(*grads))]
    lt.assign(pairs)
    for p, w in zip(params, want):
        np.testing.assert_allclose(p.numpy(), w, rtol=1e-6, atol=1e-6)


def test_origins_of_several_nodes_equal_each_nodes_own():
    """lazytensor.core.origins walks the DAG once for several nodes: each Origin equals Origin(node)."""
    from lazytensor.core.expr import Origin
    from lazytensor.core.origins import origins_of
    x, labels, layers = _mlp((5, 4, 3), 6, 1)
    tx, tl = lt.asarray(x), lt.asarray(labels)
    params = [p for layer in layers for p in layer.parameters()]
    params[0][...] = params[0] * 2                   # a write count above 0 for one tensor
    h = lt.relu(layers[0](tx))
    loss = lt.cross_entropy(layers[1](h), tl)
    grads = lt.grad(loss, params)
    lt.evaluate(h)                                   # an evaluated node below: walked through its origin
    nodes = [loss, *grads, grads[0] * 2 + params[0]]
    assert all(n.result is None for n in nodes)
    for got, node in zip(origins_of(nodes), nodes):
        want = Origin(node)
        assert got.args == want.args and got.heavy == want.heavy
        assert sorted((id(t), v) for t, v in got.versions) == sorted((id(t), v) for t, v in want.versions)


@pytest.mark.parametrize("dtype, master", [(np.float32, True), (np.float16, True), (np.float16, False)])
def test_train_step_is_the_plain_loops_step(dtype, master):
    """The bench's MLP step two ways from the same weights: the plain loop, `opt.step(lt.grad(loss,
    params))` built on every call, and lt.train_step (recorded once): the same losses and weights,
    bit for bit, over several steps (float16 parameters keep float32 master weights in both)."""
    def model():
        rng = np.random.default_rng(5)
        return lt.nn.Sequential(lt.nn.Linear(12, 16, dtype=dtype, rng=rng), lt.nn.ReLU(),
                                lt.nn.Linear(16, 16, dtype=dtype, rng=rng), lt.nn.ReLU(),
                                lt.nn.Linear(16, 5, dtype=dtype, rng=rng))

    def loss_fn(logits, labels):
        return lt.cross_entropy(logits.astype(np.float32), labels)

    rng = np.random.default_rng(6)
    data = [(lt.asarray(rng.standard_normal((9, 12)).astype(dtype)), lt.asarray(rng.integers(0, 5, 9))) for _ in range(4)]
    plain_model = model()
    opt = lt.nn.SGD(plain_model.parameters(), lr=0.1, master_weights=master)
    plain = []
    for x, y in data:
        loss = loss_fn(plain_model(x), y)
        opt.step(lt.grad(loss, opt.params))
        plain.append(float(loss.numpy()))          # the loss keeps the value it had before the update
    recorded_model = model()
    step = lt.train_step(recorded_model, loss_fn, lt.nn.SGD(recorded_model.parameters(), lr=0.1, master_weights=master))
    recorded = [float(step(x, y).numpy()) for x, y in data]
    assert recorded == plain
    for a, b in zip(recorded_model.parameters(), plain_model.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_sgd_without_master_weights_updates_float16_in_float16():
    """master_weights=False: PyTorch's step of a model cast to half (no float32 copy): w - lr * g in
    float16 arithmetic (NumPy's), against the same written out in NumPy; the default keeps masters."""
    rng = np.random.default_rng(8)
    w0 = rng.standard_normal((6, 5)).astype(np.float16)
    grads = [rng.standard_normal((6, 5)).astype(np.float16) for _ in range(3)]
    w = lt.asarray(w0.copy())
    opt = lt.nn.SGD([w], lr=0.1, master_weights=False)
    assert opt.master == [None] and ("master_weights", False) in opt.hyperparameters()
    want = w0.copy()
    for g in grads:
        opt.step([lt.asarray(g)])
        want = want - np.float16(0.1) * g
        np.testing.assert_array_equal(w.numpy(), want)
    assert lt.nn.SGD([lt.asarray(w0.copy())], lr=0.1).master[0].dtype == np.float32
