"""The NCCL path on one GPU (world size 1, no launcher): collectives on CUDA tensors, and the
distributed step, captured in a CUDA graph, equal to the plain step."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor import distributed as dist

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")]


def test_nccl_collectives_world_size_1():
    pytest.importorskip("cupy.cuda.nccl")
    assert dist.init() == (0, 1)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = lt.asarray(a, device="cuda")
    dist.all_reduce(t, "sum")
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(dist.all_gather(t).numpy(), a[None])
    np.testing.assert_array_equal(np.asarray(dist.all_reduced(t * 2, "mean")), 2 * a)


def _mlp(rng):
    return lt.nn.Sequential(lt.nn.Flatten(), lt.nn.Linear(48, 64, device="cuda", rng=rng), lt.nn.ReLU(),
                            lt.nn.Linear(64, 10, device="cuda", rng=rng))


def test_distributed_step_in_a_cuda_graph_equals_the_plain_step():
    pytest.importorskip("cupy.cuda.nccl")
    runs = []
    for distributed in (False, True):
        model = _mlp(np.random.default_rng(1))
        opt = lt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        step = lt.train_step(model, lt.cross_entropy, opt, distributed=distributed)
        rng = np.random.default_rng(0)
        losses = [float(step(lt.asarray(rng.standard_normal((16, 4, 4, 3)).astype(np.float32), device="cuda"),
                             lt.asarray(rng.integers(0, 10, 16), device="cuda"))) for _ in range(5)]
        runs.append((losses, [p.numpy() for p in model.parameters()], lt.explain(step, source=False, detail=True)))
    (l0, p0, _), (l1, p1, text) = runs
    assert "ONE graph" in text, text          # the NCCL all-reduces captured with the rest of the step
    assert "through NCCL" in text and "bucket 1" in text
    np.testing.assert_allclose(l1, l0, rtol=1e-6)
    for a, b in zip(p0, p1):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


_STUCK = """
import cupy, lazytensor as lt
from lazytensor import distributed as dist
dist.init()
spin = cupy.RawKernel(r'''extern "C" __global__ void spin(long long cycles) {
    long long start = clock64(); while (clock64() - start < cycles) {} }''', "spin")
t = lt.asarray(cupy.ones(4, cupy.float32), device="cuda")
dist.all_reduce(t, "sum")                   # the communicator made, its first call done
cupy.cuda.get_current_stream().synchronize()
print("SPINNING", flush=True)
spin((1,), (1,), (cupy.int64(1 << 40),))   # minutes of work ahead of the next all-reduce on the stream
dist.all_reduce(t, "sum")
print("ENQUEUED", flush=True)
import time; time.sleep(60)
print("NOT ABORTED", flush=True)
"""


def test_a_collective_that_never_completes_on_the_gpu_aborts_within_the_timeout():
    pytest.importorskip("cupy.cuda.nccl")
    import os
    import subprocess
    import sys
    import time
    start = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", _STUCK], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "LAZYTENSOR_DIST_TIMEOUT": "2"})
    try:
        out, err = child.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        raise AssertionError(f"not aborted; stdout: {out[-1000:]}; stderr: {err[-2000:]}") from None
    done = subprocess.CompletedProcess(child.args, child.returncode, out, err)
    assert done.returncode == 70, (done.stdout + done.stderr)[-3000:]
    assert "all_reduce did not complete on the GPU within 2 s (LAZYTENSOR_DIST_TIMEOUT)" in done.stderr
    assert "NOT ABORTED" not in done.stdout
    assert time.monotonic() - start < 40
