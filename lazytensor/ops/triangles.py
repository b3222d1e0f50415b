"""np.tril and np.triu: x with the elements above (below) the k-th diagonal of its last two axes
set to zero. Lazy: `where(col - row <= k, x, 0)` over two small index tensors, one fused kernel
with whatever else reads or feeds it."""
from __future__ import annotations

import operator

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import apply, binary


def tril(x, k=0):
    """The lower triangle: x[..., i, j] where j - i <= k, else 0."""
    return _triangle(x, k, lower=True)


def triu(x, k=0):
    """The upper triangle: x[..., i, j] where j - i >= k, else 0."""
    return _triangle(x, k, lower=False)


def _triangle(x, k, lower):
    x = _tensor.as_node(x)
    k = operator.index(k)
    if x.ndim < 2:
        raise ValueError(f"{'tril' if lower else 'triu'} needs an array of at least 2 dimensions, got shape {x.shape}")
    n, m = x.shape[-2:]
    rows = _tensor.asarray(np.arange(n, dtype=np.int64).reshape(n, 1), device=x.device)
    cols = _tensor.asarray(np.arange(m, dtype=np.int64).reshape(1, m), device=x.device)
    offset = binary("subtract", cols, rows)
    keep = binary("less_equal", offset, k) if lower else binary("greater_equal", offset, k)
    zero = _tensor.zeros((), x.dtype, x.device)
    return apply("where", keep, x, zero)
