"""sort and argsort, as NumPy's (NaN last; stable when asked). The operand is evaluated and sorted
by the array library of its device (NumPy on the CPU, CuPy on CUDA) into a new tensor: a sort is
no elementwise work to fuse."""
from __future__ import annotations

from lazytensor.core.tensor import Tensor
from lazytensor.ops.device_arrays import array_module as _array_module, evaluated as _evaluated


def sort(x, axis=-1, kind=None, stable=None, descending=False) -> Tensor:
    """np.sort along `axis` (None: flattened). `descending` (the Array API's) keeps the stable
    order of equal elements."""
    t = _evaluated(x)
    xp = _array_module(t.device)
    data = t.data.reshape(-1) if axis is None else t.data
    axis = 0 if axis is None else axis
    if descending:
        order = _argsort(xp, data, axis, stable=True, descending=True)
        return Tensor(xp.take_along_axis(data, order, axis=axis), t.device)
    return Tensor(xp.sort(data, axis=axis, **({"kind": kind} if kind else {})), t.device)


def argsort(x, axis=-1, kind=None, stable=None, descending=False) -> Tensor:
    """np.argsort along `axis` (None: flattened): int64 indices."""
    t = _evaluated(x)
    xp = _array_module(t.device)
    data = t.data.reshape(-1) if axis is None else t.data
    return Tensor(_argsort(xp, data, 0 if axis is None else axis, stable or kind == "stable", descending), t.device)


def _argsort(xp, data, axis, stable, descending):
    if not descending:
        return xp.argsort(data, axis=axis, **({"kind": "stable"} if stable else {}))
    # Descending and stable: reverse, sort stably, reverse back and map the indices.
    n = data.shape[axis]
    flipped = xp.flip(data, axis=axis)
    order = xp.flip(xp.argsort(flipped, axis=axis, kind="stable"), axis=axis)
    return (n - 1) - order
