"""NumPy's spellings of np.zeros_like, ones_like, empty_like, full_like and np.copy: new tensors
shaped like an operand (`shape=` overrides), on its device. Tensors are C-contiguous, so `order`
other than 'F' is accepted as NumPy's default layout; 'F' is refused rather than ignored."""
from __future__ import annotations

from lazytensor.core import tensor as _tensor
from lazytensor.ops.operands import operand


def _check(order, subok):
    if order not in ("K", "A", "C", None):
        raise ValueError(f"order={order!r}: lazytensor tensors are C-contiguous; pass order='C' or 'K'")
    del subok      # a tensor has no subclasses to keep


def _shape(a, shape):
    if shape is None:
        return tuple(a.shape)
    return (int(shape),) if isinstance(shape, int) else tuple(shape)


def _like(a):
    return operand(a)


def zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """np.zeros_like: zeros of a's shape and dtype (or those given)."""
    _check(order, subok)
    a = _like(a)
    return _tensor.zeros(_shape(a, shape), a.dtype if dtype is None else dtype, device or a.device)


def ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """np.ones_like: ones of a's shape and dtype (or those given)."""
    _check(order, subok)
    a = _like(a)
    return _tensor.ones(_shape(a, shape), a.dtype if dtype is None else dtype, device or a.device)


def empty_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """np.empty_like: an uninitialized tensor of a's shape and dtype (or those given)."""
    _check(order, subok)
    a = _like(a)
    return _tensor.empty(_shape(a, shape), a.dtype if dtype is None else dtype, device or a.device)


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """np.full_like: fill_value cast to a's dtype (or dtype), in a's shape (or shape)."""
    _check(order, subok)
    a = _like(a)
    dtype = a.dtype if dtype is None else dtype
    return _tensor.full(_shape(a, shape), _cast_fill(fill_value, dtype), dtype, device or a.device)


def _cast_fill(value, dtype):
    import numpy as np
    return np.array(value).astype(dtype)[()] if not hasattr(value, "shape") else value


def copy(a, order="K", subok=False):
    """np.copy: a new Tensor holding a's values (evaluated now, as NumPy copies now)."""
    _check(order, subok)
    from lazytensor.assign.evaluate import evaluate
    from lazytensor.core.expr import apply
    x = operand(a)
    # An expression computing the values (a tensor alone would evaluate to itself, not a copy).
    return evaluate(apply("trunc", x) if x.dtype.kind in "biu" else apply("add", x, -0.0))
