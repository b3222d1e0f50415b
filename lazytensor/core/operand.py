"""Operand: what Tensors and expressions share, the base class of both.

The IR gives an operand its shape, dtype and device and what follows from them; its user methods
and operators (`t.sum()`, `t.T`, `a + b`, `np.exp(t)`, `y[...] = e`) build nodes through
lazytensor.ops or evaluate through lazytensor.assign, which lie above the IR: they are set on the
class from there (lazytensor.array_methods.install) and declared for editors in operand.pyi.
"""
from __future__ import annotations


class Operand:
    __slots__ = ()

    # (the comparisons, lazy like NumPy's, are among the installed operators; __eq__ is one of them,
    # so the hash is stated here: the object's own)
    __hash__ = object.__hash__

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def strides(self) -> tuple:
        """Bytes between elements along each axis: a tensor's own, an expression's once evaluated
        (C order)."""
        data = getattr(self, "data", None)
        if data is not None:
            return tuple(data.strides)
        strides, step = [], self.dtype.itemsize
        for d in reversed(self.shape):
            strides.append(step)
            step *= max(d, 1)
        return tuple(reversed(strides))

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize
