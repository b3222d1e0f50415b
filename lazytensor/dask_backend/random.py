"""Random chunks for Dask's da.random under the lazytensor backend. A Generator's chunks come from
lt.random.default_rng over the chunk's bit generator (Dask finds it by the bit generator's module:
this PCG64 is NumPy's, named in lazytensor), so on the CPU they are NumPy-backed Dask's values, bit
for bit; RandomState's chunks are NumPy's RandomState's, as tensors on lt.default_device().

Design: docs/design/dask.md
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import asarray
from lazytensor.kernels.backend import default_device


class PCG64(np.random.PCG64):
    """NumPy's PCG64; its module tells Dask to draw chunks with lt.random.default_rng."""


class RandomState:
    """np.random.RandomState whose draws are tensors."""

    def __init__(self, seed=None):
        self._state = np.random.RandomState(seed)

    def __getattr__(self, name):
        draw = getattr(self._state, name)

        def drawn(*args, **kwargs):
            return asarray(draw(*args, **kwargs), device=default_device())
        return drawn
