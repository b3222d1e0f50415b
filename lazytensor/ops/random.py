"""lt.random.default_rng(seed): a random-number Generator with NumPy's Generator methods, whose
results are tensors. On the CPU the values are NumPy's generator's, bit for bit (the same seed gives
the same stream as np.random.default_rng); on CUDA they come from CuPy's generator on the device,
a different stream: the same seed gives different numbers on the two devices."""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import Tensor
from lazytensor.kernels.backend import default_device


class Generator:
    """Draws tensors on one device (`device`, by default lt.default_device())."""

    def __init__(self, seed=None, device=None):
        self.device = default_device() if device is None else device
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"unknown device {self.device!r}: expected 'cpu' or 'cuda'")
        if self.device == "cuda":
            import cupy
            if isinstance(seed, (np.random.BitGenerator, np.random.SeedSequence)):    # (Dask's chunks' seeds)
                seed = int((seed if isinstance(seed, np.random.SeedSequence) else seed.seed_seq).generate_state(1)[0])
            self._rng = cupy.random.default_rng(seed)
        else:
            self._rng = np.random.default_rng(seed)

    def __repr__(self):
        return f"lt.random.Generator(device={self.device!r})"

    def _tensor(self, data) -> Tensor:
        xp = np
        if self.device == "cuda":
            import cupy as xp
        return Tensor(xp.asarray(data), self.device)     # size=None draws a scalar: a 0-d tensor

    def random(self, size=None, dtype=np.float64, out=None) -> Tensor:
        """Uniform floats in [0, 1)."""
        if out is not None:
            raise TypeError("lt.random's draws are new tensors: random() takes no out=")
        return self._tensor(self._rng.random(size, dtype=dtype))

    def standard_normal(self, size=None, dtype=np.float64, out=None) -> Tensor:
        if out is not None:
            raise TypeError("lt.random's draws are new tensors: standard_normal() takes no out=")
        return self._tensor(self._rng.standard_normal(size, dtype=dtype))

    def uniform(self, low=0.0, high=1.0, size=None) -> Tensor:
        """Uniform float64 values in [low, high)."""
        if self.device == "cpu":
            return self._tensor(self._rng.uniform(low, high, size))
        return self._tensor(low + (high - low) * self._rng.random(size))

    def normal(self, loc=0.0, scale=1.0, size=None) -> Tensor:
        if self.device == "cpu":
            return self._tensor(self._rng.normal(loc, scale, size))
        return self._tensor(loc + scale * self._rng.standard_normal(size))

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False) -> Tensor:
        """Integers in [low, high) ([low, high] with endpoint=True; [0, low) when high is None)."""
        return self._tensor(self._rng.integers(low, high, size, dtype=dtype, endpoint=endpoint))


    def __getattr__(self, name):
        """The device generator's other distributions (exponential, poisson, ...), drawing tensors."""
        draw = getattr(self._rng, name) if not name.startswith("_") else None
        if not callable(draw):
            raise AttributeError(f"lt.random.Generator has no attribute {name!r}")

        def drawn(*args, **kwargs):
            return self._tensor(draw(*args, **kwargs))
        drawn.__name__ = name
        return drawn


def default_rng(seed=None, device=None) -> Generator:
    """A Generator seeded like np.random.default_rng(seed), drawing tensors on `device`."""
    return Generator(seed, device)
