"""CUDA chunks under the threaded scheduler: the backend's chunks live on the GPU and the values are
the NumPy-backed program's."""
from __future__ import annotations

import numpy as np
import pytest

import lazytensor as lt

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


@pytest.mark.gpu
def test_cuda_chunks_on_the_threaded_scheduler():
    if not lt.cuda_usable():
        pytest.skip("needs CUDA")
    host = np.random.default_rng(0).random((512, 256))
    d = da.from_array(lt.asarray(host, device="cuda"), chunks=(128, 256))
    e = da.maximum((d + 1) * d + 5 * d, 0)
    with dask.config.set(scheduler="threads"):
        kept = e.persist()
        assert all(b.device == "cuda" for b in dask.compute(*kept.to_delayed().ravel()))
        np.testing.assert_allclose(np.asarray(e.compute()), np.maximum((host + 1) * host + 5 * host, 0), rtol=1e-15)
        np.testing.assert_allclose(float(e.mean().compute()), np.maximum((host + 1) * host + 5 * host, 0).mean(),
                                   rtol=1e-12)
        np.testing.assert_allclose(float(e.sum().compute()), np.maximum((host + 1) * host + 5 * host, 0).sum(),
                                   rtol=1e-12)
