"""Tensors and expressions pickle as their values (an expression is evaluated), and unpickle as
Tensors on their device; Dask's memory accounting reads what an operand keeps alive."""
from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

import lazytensor as lt


@pytest.mark.parametrize("protocol", [2, 5])
def test_tensors_and_expressions_pickle_as_values(protocol):
    host = np.arange(12.0).reshape(3, 4)
    t = lt.asarray(host, device="cpu")
    for x, want in ((t, host), (t * 2 + 1, host * 2 + 1), (t[:, 1::2], host[:, 1::2]), (t.sum(axis=0), host.sum(0)),
                    (lt.asarray(np.array(-0.0), device="cpu"), np.array(-0.0))):
        y = pickle.loads(pickle.dumps(x, protocol=protocol))
        assert type(y) is lt.Tensor and y.device == "cpu" and y.dtype == want.dtype
        np.testing.assert_array_equal(y.numpy(), want)
        assert np.array_equal(np.signbit(y.numpy()), np.signbit(want))


def test_an_unpickled_tensor_is_its_own_memory():
    t = lt.asarray(np.zeros(4), device="cpu")
    y = pickle.loads(pickle.dumps(t))
    y[...] = 1.0
    assert t.numpy().tolist() == [0.0] * 4


def test_sizeof_counts_the_memory_kept_alive():
    t = lt.asarray(np.zeros(1000), device="cpu")
    u = lt.asarray(np.zeros(500), device="cpu")
    assert sys.getsizeof(t) >= 8000
    e = t + t + u[:1]                        # lazy: keeps t and u[:1] alive, once each
    assert 8008 <= sys.getsizeof(e) < 8000 + 1000
    e.eval()
    assert sys.getsizeof(e) >= 8000


@pytest.mark.gpu
def test_cuda_tensors_pickle_through_the_host():
    if not lt.cuda_usable():
        pytest.skip("needs CUDA")
    t = lt.asarray(np.arange(6.0), device="cuda")
    y = pickle.loads(pickle.dumps(t * 3))
    assert y.device == "cuda"
    np.testing.assert_array_equal(y.numpy(), np.arange(6.0) * 3)
