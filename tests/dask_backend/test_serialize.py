"""Tensors and expressions in dask.distributed's serialization families: "dask" sends a tensor as its
array's frames, an expression as its value; "cuda" sends a CUDA tensor's device memory and leaves a
CPU tensor to the next family. Each unpacks as a Tensor on its device with the same bits."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt

pytest.importorskip("dask")
protocol = pytest.importorskip("distributed.protocol")


@pytest.fixture(autouse=True, scope="module")
def registered():
    lt.dask_backend.register()      # (a worker registers as it imports lazytensor: test_distributed.py)


def _roundtrip(x, serializers):
    header, frames = protocol.serialize(x, serializers=serializers, on_error="raise")
    return header, protocol.deserialize(header, frames, deserializers=serializers)


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(0, 5), min_size=0, max_size=3), dtype=st.sampled_from(["float64", "float32", "int32", "bool"]),
       seed=st.integers(0, 2**16), view=st.booleans())
def test_tensors_travel_in_the_dask_family(shape, dtype, seed, view):
    host = (np.random.default_rng(seed).standard_normal(shape) * 10).astype(dtype)
    t = lt.asarray(host, device="cpu")
    if view and host.ndim:
        t, host = t[..., ::-1], host[..., ::-1]          # not contiguous
    header, y = _roundtrip(t, ("dask",))
    assert header["serializer"] == "dask" and header["sub-header"]["device"] == "cpu"
    assert type(y) is lt.Tensor and y.device == "cpu" and y.dtype == host.dtype and y.shape == host.shape
    assert y.numpy().tobytes() == np.ascontiguousarray(host).tobytes()


def test_expressions_travel_as_their_values():
    host = np.arange(12.0).reshape(3, 4) - 6
    t = lt.asarray(host, device="cpu")
    for e, want in ((t * -0.0 + 1, host * -0.0 + 1), (t.sum(axis=0), host.sum(0)), (t[:, 1::2] ** 2, host[:, 1::2] ** 2)):
        header, y = _roundtrip(e, ("dask",))
        assert header["serializer"] == "dask"
        assert type(y) is lt.Tensor
        assert y.numpy().tobytes() == want.tobytes()


def test_a_cpu_tensor_is_left_to_the_next_family():
    t = lt.asarray(np.arange(5.0), device="cpu")
    header, y = _roundtrip(t, ("cuda", "dask"))
    assert header["serializer"] == "dask"
    assert y.numpy().tolist() == list(range(5))


def test_a_reductions_partial_results_travel_one_by_one():
    """A tuple of tensors (a mean's partial results) is serialized element by element, each in the
    dask family, rather than pickled whole."""
    t = lt.asarray(np.arange(6.0), device="cpu")
    header, y = _roundtrip((t, t * 2), ("dask", "pickle"))
    assert header.get("is-collection") and [h["serializer"] for h in header["sub-headers"]] == ["dask", "dask"]
    assert [v.numpy().tolist() for v in y] == [list(range(6)), [2.0 * i for i in range(6)]]


@pytest.mark.gpu
def test_cuda_tensors_travel_as_device_frames_in_the_cuda_family():
    if not lt.cuda_usable():
        pytest.skip("needs CUDA")
    host = np.random.default_rng(0).random((64, 33))
    t = lt.asarray(host, device="cuda")
    header, frames = protocol.serialize(t * 2, serializers=("cuda",), on_error="raise")
    assert header["serializer"] == "cuda"
    assert all(hasattr(f, "__cuda_array_interface__") for f in frames)       # device memory, no host copy
    y = protocol.deserialize(header, frames, deserializers=("cuda",))
    assert type(y) is lt.Tensor and y.device == "cuda"
    assert y.numpy().tobytes() == (host * 2).tobytes()
    header, y = _roundtrip(t[:, ::2], ("dask",))                              # through the host
    assert header["serializer"] == "dask" and y.device == "cuda"
    assert y.numpy().tobytes() == np.ascontiguousarray(host[:, ::2]).tobytes()
