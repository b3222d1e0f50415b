"""A 0-d input (a full reduction's result, a 0-d tensor) in a kernel large enough for numba's
parallel loop (2^17 elements or more) over an array of higher rank: the compiled kernels read it once
before the loop (inside a parallel loop numba takes a 0-d array for a scalar, and `in0[()]` failed to
compile), for elementwise kernels and reductions, against NumPy."""
import numpy as np
import pytest

import lazytensor as lt

SHAPES = [(512, 320), (64, 64, 4, 10)]


@pytest.mark.parametrize("shape", SHAPES)
def test_elementwise_kernels_read_a_0d_input(shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    a, s = lt.asarray(x), lt.asarray(np.float32(3))
    np.testing.assert_allclose(lt.evaluate(a - a.mean()).numpy(), x - x.mean(dtype=np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(lt.evaluate(lt.where(s > 2, a * s, a)).numpy(), x * np.float32(3))
    strided = lt.asarray(x)[..., ::2]
    np.testing.assert_array_equal(lt.evaluate(strided * s).numpy(), x[..., ::2] * np.float32(3))


@pytest.mark.parametrize("shape", SHAPES)
def test_reductions_read_a_0d_input(shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    a, s = lt.asarray(x), lt.asarray(np.float32(2))
    np.testing.assert_allclose(lt.sum((a - a.mean()) ** 2).numpy(), ((x - x.mean(dtype=np.float64)) ** 2).sum(),
                               rtol=1e-4)
    np.testing.assert_allclose(lt.sum(a * s, axis=0).numpy(), (x * 2).sum(axis=0, dtype=np.float64), rtol=1e-4, atol=1e-4)
    assert not lt.any(~lt.isfinite(a * s)).numpy()
