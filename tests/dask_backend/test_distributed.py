"""On a dask.distributed LocalCluster of two worker processes (tests/dask_backend/conftest.py):
lazytensor chunks travel in the dask serialization family (as their values), the values are the
NumPy-backed program's, each worker loads the kernels the client compiled from the shared disk
cache, and a worker killed mid-computation is recovered."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lazytensor as lt
from tests.dask_backend.programs import chunked_shapes, inputs

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


def expression(d, e):
    return ((d - e) ** 2 + d * 0.5).sum(axis=0)


@pytest.mark.compiled_tier
def test_values_and_kernels_from_the_shared_disk_cache(client):
    hosts = [np.random.default_rng(s).random((60, 40)) for s in (1, 2)]
    lazy = [da.from_array(lt.asarray(h, device="cpu"), chunks=(20, 40)) for h in hosts]
    expression(*lazy).compute(scheduler="sync")          # the client compiles the kernels (to the disk cache)
    got = client.compute(expression(*lazy)).result(timeout=120)
    assert type(got) is lt.Tensor
    plain = expression(*(da.from_array(h, chunks=(20, 40)) for h in hosts)).compute(scheduler="sync")
    np.testing.assert_allclose(got.numpy(), plain, rtol=1e-13)

    a, b = (lt.asarray(h, device="cpu") for h in hosts)
    assert _caches(a, b) in (["compiled"], ["disk"], ["memory"])        # compiled here, or earlier
    seen = client.run(_caches, a, b)
    assert all(kinds in (["disk"], ["memory"]) for kinds in seen.values()), seen
    assert len(seen) == 2


def _caches(a, b):
    with lt.profile() as p:
        lt.evaluate((a - b) * 3.5 + a)
    return sorted({k.cache for k in p.kernels})


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(chunking=chunked_shapes(), seed=st.integers(0, 2**16))
def test_drawn_chunkings_on_the_cluster(client, chunking, seed):
    shape, chunks = chunking
    f = lambda d, e: da.maximum((d + e) * e + 5 * d, 0)     # noqa: E731
    got = client.compute(f(*inputs(shape, chunks, seed, "lazytensor"))).result(timeout=120)
    want = f(*inputs(shape, chunks, seed, "numpy")).compute(scheduler="sync")
    np.testing.assert_array_equal(got.numpy(), want)


def _slowly(block):
    time.sleep(0.3)
    return block + 1


def test_a_worker_killed_mid_computation_is_recovered(client):
    host = np.arange(32 * 10, dtype=np.float64).reshape(32, 10)
    x = da.from_array(lt.asarray(host, device="cpu"), chunks=(2, 10))
    total = (x.map_blocks(_slowly, meta=x._meta) * 2).sum()
    future = client.compute(total)
    deadline = time.time() + 60
    while not any(client.processing().values()) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    victim = next(iter(client.scheduler_info()["workers"]))
    client.run(os._exit, 1, workers=[victim], on_error="ignore")        # the nanny starts another
    assert float(future.result(timeout=120)) == float(((host + 1) * 2).sum())
    client.wait_for_workers(2, timeout=60)


def _serializers_registered():
    from lazytensor.dask_backend import hooks, serialize
    return bool(serialize._registered), bool(hooks._registered)


def test_workers_serialize_tensors_in_the_dask_family(client):
    """A worker registers tensors with distributed's serializers as it imports lazytensor (before
    any Dask collection reaches it); the chunks it sends are framed by the dask family."""
    assert all(serializers for serializers, _ in client.run(_serializers_registered).values())
    x = da.from_array(lt.asarray(np.arange(40.0), device="cpu"), chunks=10) * 2
    got = client.compute(x).result(timeout=120)
    np.testing.assert_array_equal(got.numpy(), np.arange(40.0) * 2)
    assert client.run(_framed_by, got) == {w: "dask" for w in client.scheduler_info()["workers"]}


def test_a_process_running_distributed_registers_as_it_imports_lazytensor():
    code = ("import distributed, lazytensor; from lazytensor.dask_backend import serialize, hooks; "
            "print(bool(serialize._registered), bool(hooks._registered))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "False"]          # the serializers, and Dask's tables not yet


def _framed_by(t):
    from distributed.protocol import serialize
    return serialize(t)[0]["serializer"]

