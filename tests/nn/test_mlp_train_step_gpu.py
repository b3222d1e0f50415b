"""The MLP training step of the autodiff bench (Linear/ReLU, cross_entropy in float32, SGD) through
lt.train_step on CUDA: the same step as the plain loop (opt.step(lt.grad(loss, params))) over several
steps, ONE CUDA graph launch per call from the third, and explain shows each Linear+ReLU's epilogue choice."""
import numpy as np
import pytest

import lazytensor as lt

needs_cuda = pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")
pytestmark = [pytest.mark.gpu, needs_cuda]


def _model(dtype, seed=0):
    rng = np.random.default_rng(seed)
    model = lt.nn.Sequential(lt.nn.Linear(784, 512, dtype=dtype, device="cuda", rng=rng), lt.nn.ReLU(),
                             lt.nn.Linear(512, 512, dtype=dtype, device="cuda", rng=rng), lt.nn.ReLU(),
                             lt.nn.Linear(512, 10, dtype=dtype, device="cuda", rng=rng))
    return model, lt.nn.SGD(model.parameters(), lr=0.05)


def _loss(logits, labels):
    return lt.cross_entropy(logits.astype(np.float32), labels)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_train_step_equals_the_plain_loop_and_is_one_graph(dtype):
    rng = np.random.default_rng(1)
    x = lt.asarray(rng.standard_normal((256, 784)).astype(dtype), device="cuda")
    labels = lt.asarray(rng.integers(0, 10, 256), device="cuda")
    model, opt = _model(dtype)
    plain = []
    for _ in range(5):
        loss = _loss(model(x), labels)
        opt.step(lt.grad(loss, opt.params))
        plain.append(float(loss.numpy()))
    recorded_model, recorded_opt = _model(dtype)
    step = lt.train_step(recorded_model, _loss, recorded_opt)
    recorded = []
    for i in range(5):
        with lt.profile() as p:
            recorded.append(float(step(x, labels).numpy()))
        if i >= 2:
            kinds = [r.kind for r in p.kernels]
            assert kinds.count("graph") == 1 and len(kinds) <= 4, kinds
    rtol = 1e-5 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(recorded, plain, rtol=rtol)
    assert recorded[-1] < recorded[0]
    for a, b in zip(recorded_model.parameters(), model.parameters()):
        np.testing.assert_allclose(a.numpy().astype(np.float64), b.numpy().astype(np.float64), rtol=rtol, atol=rtol)
    text = lt.explain(step, source=False, detail=True)
    assert "the whole step is ONE graph of" in text, text[-3000:]
    chosen = text.count("RELU_BIAS epilogue") + text.count("no cuBLASLt epilogue for relu(a @ b + bias)")
    assert chosen == 2, text
    print("\n".join(line for line in text.splitlines() if "Matmul" in line or "CUDA graph" in line))
