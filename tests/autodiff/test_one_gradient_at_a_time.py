"""Each gradient evaluated alone equals the same gradient evaluated with the others: a plan of one
gradient still writes every temporary before the steps that read it (a pooling's backward reads the
activation that the forward under its incoming gradient pools too)."""
import numpy as np
import pytest

import lazytensor as lt


@pytest.mark.parametrize("pool", [lt.nn.MaxPool2d(2), lt.nn.AvgPool2d(2)], ids=["max", "avg"])
def test_each_gradient_alone_equals_all_together(pool):
    rng = np.random.default_rng(0)
    x = lt.asarray(rng.standard_normal((4, 6, 6, 3), dtype=np.float32))
    model = lt.nn.Sequential(lt.nn.ConvBNReLU(3, 8), pool, lt.nn.ConvBNReLU(8, 8))
    params = model.parameters()
    together = [t.numpy() for t in lt.evaluate(*lt.grad(lt.sum(model(x)), params))]
    for i, p in enumerate(params):
        alone = lt.evaluate(lt.grad(lt.sum(model(x)), p)).numpy()
        np.testing.assert_allclose(alone, together[i], rtol=1e-5, atol=1e-6, err_msg=f"gradient {i}")
