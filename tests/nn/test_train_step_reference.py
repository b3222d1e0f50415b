"""lt.train_step of a small VGG (two Conv-BN-ReLU blocks, max pooling, a Linear) in float64 against
the same training step written out by hand in NumPy: forward, backward, SGD with momentum."""
import numpy as np
from hypothesis import given, settings, strategies as st

import lazytensor as lt

EPS, BN_MOMENTUM = 1e-5, 0.1


def small_vgg(seed):
    rng = np.random.default_rng(seed)
    f64 = np.float64
    return lt.nn.Sequential(
        lt.nn.Conv2d(3, 4, 3, padding=1, bias=False, dtype=f64, rng=rng), lt.nn.BatchNorm2d(4), lt.nn.ReLU(),
        lt.nn.Conv2d(4, 6, 3, padding=1, bias=False, dtype=f64, rng=rng), lt.nn.BatchNorm2d(6), lt.nn.ReLU(),
        lt.nn.MaxPool2d(2), lt.nn.Flatten(), lt.nn.Linear(4 * 4 * 6, 3, dtype=f64, rng=rng))


# -- the reference, from the definitions ------------------------------------------------------------

def conv(x, w):
    """3x3, padding 1, NHWC x, KRSC w."""
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    n, h, wd, _ = x.shape
    out = np.zeros((n, h, wd, w.shape[0]))
    for r in range(3):
        for s in range(3):
            out += np.einsum("npqc,kc->npqk", xp[:, r:r + h, s:s + wd], w[:, r, s])
    return out


def conv_backward(x, w, dy):
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    n, h, wd, _ = x.shape
    dw = np.zeros_like(w)
    dxp = np.zeros_like(xp)
    for r in range(3):
        for s in range(3):
            dw[:, r, s] = np.einsum("npqc,npqk->kc", xp[:, r:r + h, s:s + wd], dy)
            dxp[:, r:r + h, s:s + wd] += np.einsum("npqk,kc->npqc", dy, w[:, r, s])
    return dxp[:, 1:-1, 1:-1], dw


def bn_relu(y, gamma, beta):
    m, v = y.mean(axis=(0, 1, 2)), y.var(axis=(0, 1, 2))
    xhat = (y - m) / np.sqrt(v + EPS)
    return np.maximum(xhat * gamma + beta, 0), (xhat, v, m)


def bn_relu_backward(dout, out, gamma, saved):
    xhat, v, _ = saved
    d = dout * (out > 0)
    dgamma, dbeta = (d * xhat).sum(axis=(0, 1, 2)), d.sum(axis=(0, 1, 2))
    dy = gamma / np.sqrt(v + EPS) * (d - d.mean(axis=(0, 1, 2)) - xhat * (d * xhat).mean(axis=(0, 1, 2)))
    return dy, dgamma, dbeta


def reference_step(p, state, x, labels, lr, momentum):
    """One step of the network in float64 (BN's parameters and running statistics are float32, as
    lt.nn's: their update is float32 arithmetic). Returns the loss; updates p and state."""
    g1, b1, g2, b2 = (p[k].astype(np.float64) for k in ("g1", "b1", "g2", "b2"))
    y1 = conv(x, p["w1"])
    a1, s1 = bn_relu(y1, g1, b1)
    y2 = conv(a1, p["w2"])
    a2, s2 = bn_relu(y2, g2, b2)
    n, h, w, c = a2.shape
    windows = a2.reshape(n, h // 2, 2, w // 2, 2, c)
    pooled = windows.max(axis=(2, 4))
    flat = pooled.reshape(n, -1)
    logits = flat @ p["W"].T + p["b"]
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(n), labels].mean()
    # backward
    dlogits = np.exp(logp)
    dlogits[np.arange(n), labels] -= 1
    dlogits /= n
    grads = {"W": dlogits.T @ flat, "b": dlogits.sum(axis=0)}
    dpooled = (dlogits @ p["W"]).reshape(pooled.shape)
    first_max = windows == pooled[:, :, None, :, None, :]          # no ties among random values
    da2 = (first_max * dpooled[:, :, None, :, None, :]).reshape(a2.shape)
    dy2, grads["g2"], grads["b2"] = bn_relu_backward(da2, a2, g2, s2)
    da1, grads["w2"] = conv_backward(a1, p["w2"], dy2)
    dy1, grads["g1"], grads["b1"] = bn_relu_backward(da1, a1, g1, s1)
    _, grads["w1"] = conv_backward(x, p["w1"], dy1)
    # SGD with momentum (PyTorch's: the first buffer is the gradient)
    for k, g in grads.items():
        dtype = p[k].dtype.type
        g = dtype(1.0) * g.astype(dtype)
        buf = state["buf"].get(k)
        buf = g if buf is None else dtype(momentum) * buf + dtype(1.0) * g
        state["buf"][k] = buf
        p[k] = p[k] - dtype(lr) * buf
    # running statistics, float32 (lazytensor's finalize computes them in double, then rounds)
    for i, (mean, var) in enumerate(((s1[2], s1[1]), (s2[2], s2[1])), 1):
        count = n * h * w
        rm, rv = state[f"rm{i}"], state[f"rv{i}"]
        state[f"rm{i}"] = ((1 - BN_MOMENTUM) * rm.astype(np.float64) + BN_MOMENTUM * mean).astype(np.float32)
        state[f"rv{i}"] = ((1 - BN_MOMENTUM) * rv.astype(np.float64)
                           + BN_MOMENTUM * var * count / (count - 1)).astype(np.float32)
    return loss


NAMES = {"w1": "0.weight", "g1": "1.weight", "b1": "1.bias", "w2": "3.weight", "g2": "4.weight", "b2": "4.bias",
         "W": "8.weight", "b": "8.bias"}


@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**16), batch=st.sampled_from([3, 4]), lr=st.sampled_from([0.05, 0.2]),
       momentum=st.sampled_from([0.5, 0.9]))
def test_a_small_vgg_step_matches_a_float64_numpy_reference(seed, batch, lr, momentum):
    model = small_vgg(seed)
    rng = np.random.default_rng(seed + 1)
    # the model's own layout (KRSC weights, NHWC-ordered Linear columns): no conversion to undo
    params = {k: getattr(model[int(v.split(".")[0])], v.split(".")[1]).numpy() for k, v in NAMES.items()}
    for k in ("g1", "b1", "g2", "b2"):       # BN parameters away from 1 and 0
        params[k] = rng.uniform(0.5, 1.5, params[k].shape).astype(np.float32) if k[0] == "g" else \
            rng.uniform(-0.5, 0.5, params[k].shape).astype(np.float32)
        getattr(model[int(NAMES[k][0])], NAMES[k].split(".")[1])[...] = params[k]
    state = {"buf": {}, "rm1": np.zeros(4, np.float32), "rv1": np.ones(4, np.float32),
             "rm2": np.zeros(6, np.float32), "rv2": np.ones(6, np.float32)}
    step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=lr, momentum=momentum))
    for _ in range(3):
        x = rng.standard_normal((batch, 8, 8, 3))
        labels = rng.integers(0, 3, batch)
        got = float(step(x, labels).numpy())
        want = reference_step(params, state, x, labels, lr, momentum)
        np.testing.assert_allclose(got, want, rtol=1e-10)
    for k, name in NAMES.items():
        module, attr = model[int(name.split(".")[0])], name.split(".")[1]
        value = getattr(module, attr).numpy()
        if value.dtype == np.float64:
            np.testing.assert_allclose(value, params[k], rtol=1e-10, atol=1e-12, err_msg=k)
        else:                               # float32 BN parameters: their update rounds to float32
            np.testing.assert_allclose(value, params[k], rtol=1e-6, atol=1e-7, err_msg=k)
    for i, bn in ((1, model[1]), (2, model[4])):
        np.testing.assert_allclose(bn.running_mean.numpy(), state[f"rm{i}"], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(bn.running_var.numpy(), state[f"rv{i}"], rtol=1e-6, atol=1e-7)
