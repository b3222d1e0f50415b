"""Constructors NumPy users reach for beyond zeros/ones/full/arange: linspace, eye, identity.
Their values depend on no tensor, so NumPy computes them on the host and they are copied to the
device once, as lt.arange does."""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import Tensor, asarray


def linspace(start, stop, num=50, endpoint=True, dtype=None, device=None) -> Tensor:
    """np.linspace: `num` evenly spaced values over [start, stop] (float64 unless dtype says)."""
    return asarray(np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype), device=device)


def eye(N, M=None, k=0, dtype=None, device=None) -> Tensor:
    """np.eye: ones on the k-th diagonal of an N x M matrix, zeros elsewhere (float64 by default)."""
    return asarray(np.eye(N, M, k, dtype=np.float64 if dtype is None else dtype), device=device)


def identity(n, dtype=None, device=None) -> Tensor:
    """np.identity: the n x n identity matrix (float64 by default)."""
    return eye(n, dtype=dtype, device=device)
