"""Displays and lazytensor.testing on device='cuda': an expression's HTML plans without a launch (a
reduction included), a tensor's shows its device, the strategies draw CUDA tensors and the
assertions evaluate on the GPU. Skipped where CuPy or a CUDA device is missing."""
from __future__ import annotations

import numpy as np
import pytest

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402
from lazytensor.testing import assert_allclose, assert_same_as_numpy  # noqa: E402


def test_cuda_displays_run_nothing():
    a = lt.asarray(np.linspace(-2, 2, 3 * 1000, dtype=np.float32).reshape(3, 1000), device="cuda")
    b = lt.asarray(np.linspace(0, 1, 1000, dtype=np.float32), device="cuda")
    e = lt.relu(a * b + 1)
    r = lt.sum(lt.exp(a), axis=1)
    with lt.profile() as p:
        page = e._repr_html_()
        reduction = r._repr_html_()
        explained = lt.explain(e)._repr_html_()
    assert p.launches == 0
    assert "FusedElementwise on cuda" in page and "cuda" in page
    assert "FusedReduction on cuda" in reduction
    assert "cuda kernel lt_" in explained and "__global__" in explained
    assert "device=&#x27;cuda&#x27;" in b._repr_html_()      # a tensor's values: a device-to-host copy


def test_cuda_assertions_and_strategies():
    from hypothesis import given, settings
    from lazytensor.testing import expressions, tensors

    x = np.array([[1.0, 2.0, 3.0], [1000.0, 0.0, -1000.0]], np.float32)

    def softmax(v):
        xp = lt if isinstance(v, (lt.Tensor, lt.Expr)) else np
        ex = xp.exp(v - xp.max(v, axis=-1, keepdims=True))
        return ex / xp.sum(ex, axis=-1, keepdims=True)

    assert_same_as_numpy(softmax, x, device="cuda")
    assert_allclose(lt.exp(lt.asarray(x, device="cuda")), np.exp(x), rtol=1e-6)

    @settings(max_examples=10, deadline=None, database=None)
    @given(tensors(np.float32, (4, 5), device="cuda", layouts=("contiguous", "strided", "reversed")))
    def check_tensor(t):
        assert t.device == "cuda" and t.shape == (4, 5)

    leaves = [lt.asarray(np.array([0.5, -2.0, 3.0], np.float32), device="cuda")]

    @settings(max_examples=10, deadline=None, database=None)
    @given(expressions(leaves, max_depth=3))
    def check_expression(dag):
        dag.check()

    check_tensor()
    check_expression()
