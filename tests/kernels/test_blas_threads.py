"""single_threaded_blas: NumPy's BLAS on one thread inside the block, its count restored after,
also when the block raises; a plain no-op where threadpoolctl finds no BLAS (or is not installed)."""
import numpy as np
import pytest

from lazytensor.kernels.cpu import blas_threads


def test_one_thread_inside_and_the_count_restored_after():
    np.ones((2, 2)) @ np.ones((2, 2))           # NumPy's BLAS loaded
    before = blas_threads.blas_threads()
    if before is None:
        pytest.skip("threadpoolctl finds no BLAS among the loaded libraries")
    with blas_threads.single_threaded_blas():
        assert blas_threads.blas_threads() == 1
        np.testing.assert_array_equal(np.ones((3, 4)) @ np.ones((4, 2)), np.full((3, 2), 4.0))
    assert blas_threads.blas_threads() == before
    with pytest.raises(KeyError):
        with blas_threads.single_threaded_blas():
            raise KeyError("inside")
    assert blas_threads.blas_threads() == before


def test_without_a_blas_the_block_changes_nothing(monkeypatch):
    monkeypatch.setattr(blas_threads, "_controller", lambda: None)
    assert blas_threads.blas_threads() is None
    with blas_threads.single_threaded_blas():
        pass
