"""Planning over address space alone: the temporaries of a plan whose memory comes later.

Design: docs/design/training-step.md, section "lazytensor/plan/planning_space.py".
"""
from __future__ import annotations

import contextlib
import math
import threading

import numpy as np

from lazytensor.core.memory import address, owner, owner_address
from lazytensor.core.tensor import Tensor

_FIRST_ADDRESS = 1 << 52        # above the 49-57 bit virtual address spaces of CUDA devices
_ALIGNMENT = 512
_next_address = [_FIRST_ADDRESS]
_lock = threading.Lock()
_active: list = []              # the PlanningSpaces planning now, innermost last


class PlanningSpace:
    """`with PlanningSpace(backend) as space:` the backend's `empty` hands out placeholders;
    `space.holds(owner)` tells whether an allocation is one of them."""

    def __init__(self, backend):
        self.backend = backend
        self.owners: dict = {}          # id(owner) -> owner: the placeholders handed out (kept: ids stay unique)

    def __enter__(self):
        # An instance attribute shadows the class's method (and a wrapper already there, such as
        # lazytensor.tools.peak_memory's, which comes back on exit).
        self._previous = vars(self.backend).get("empty")
        self._install()
        _active.append(self)
        return self

    def __exit__(self, *exc):
        _active.remove(self)
        self._uninstall()
        return False

    def _install(self) -> None:
        self.backend.empty = self.empty

    def _uninstall(self) -> None:
        if self._previous is None:
            del self.backend.empty
        else:
            self.backend.empty = self._previous

    def empty(self, shape, dtype):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        dtype = np.dtype(dtype)
        if not self.backend.host_memory:
            a = _device_placeholder(shape, dtype)
            own = a.data.mem
        else:
            a = own = np.empty(shape, dtype)
            a.flags.writeable = False
        self.owners[id(own)] = own
        return a

    def holds(self, own) -> bool:
        return self.owners.get(id(own)) is own

    def release(self) -> None:
        self.owners.clear()


def _device_placeholder(shape, dtype):
    import cupy
    nbytes = math.prod(shape) * dtype.itemsize
    with _lock:
        ptr = _next_address[0]
        _next_address[0] += -(-max(nbytes, 1) // _ALIGNMENT) * _ALIGNMENT
    mem = cupy.cuda.UnownedMemory(ptr, nbytes, None, cupy.cuda.runtime.getDevice())
    return cupy.ndarray(shape, dtype, memptr=cupy.cuda.MemoryPointer(mem, 0))


@contextlib.contextmanager
def backed(measure):
    """While planning over placeholders: the placeholders `measure` (a function) reaches backed by
    real memory for the duration of the block. Elsewhere: nothing to do."""
    if not _active:
        yield
        return
    space = _active[-1]
    backing = _Backing(space)
    space._uninstall()                  # what the measurement allocates itself is real memory too
    try:
        backing.visit(measure)
        yield
    finally:
        space._install()
        for holder, key, old in reversed(backing.undo):
            if type(holder) is list:
                holder[key] = old
            else:
                setattr(holder, key, old)
        backing.undo.clear()
        backing.real.clear()


class _Backing:
    """Real memory in place of placeholders, with the log of what to put back."""

    def __init__(self, space):
        self.space = space
        self.real: dict = {}        # id(placeholder allocation) -> the real allocation standing in for it
        self.undo: list = []        # (holder, slot name or list index, the placeholder value)
        self.seen: set = set()

    def visit(self, v):
        """v, or what stands in for it (an array); objects holding placeholders are changed in place."""
        t = type(v)
        if t is not Tensor and (hasattr(v, "__array_interface__") or hasattr(v, "__cuda_array_interface__")):
            return self._array(v)
        if id(v) in self.seen or v is None or t in (int, float, str, bool):
            return v
        self.seen.add(id(v))
        if t is Tensor:
            self._put(v, "data", self._array(v.data))
        elif hasattr(v, "__self__") and hasattr(v, "__func__"):    # a bound method: its object
            self.visit(v.__self__)
        elif hasattr(v, "func") and hasattr(v, "args") and hasattr(v, "keywords"):    # functools.partial
            self.visit(v.func)
            self.visit(v.args)
        elif t is list:
            for i, x in enumerate(v):
                self._put(v, i, self.visit(x))
        elif t is tuple:
            items = [self.visit(x) for x in v]
            return tuple(items) if any(a is not b for a, b in zip(items, v)) else v
        elif hasattr(v, "__code__"):                         # a function: what its closure holds
            for cell in v.__closure__ or ():
                try:
                    self._put(cell, "cell_contents", self.visit(cell.cell_contents))
                except ValueError:                          # a cell not yet assigned
                    pass
        elif hasattr(v, "run") and hasattr(t, "__slots__"):   # a step
            for cls in t.__mro__:
                for name in getattr(cls, "__slots__", ()):
                    if name != "__weakref__" and hasattr(v, name):
                        self._put(v, name, self.visit(getattr(v, name)))
        return v

    def _put(self, holder, key, new) -> None:
        old = holder[key] if type(holder) is list else getattr(holder, key)
        if new is not old:
            self.undo.append((holder, key, old))
            if type(holder) is list:
                holder[key] = new
            else:
                setattr(holder, key, new)

    def _array(self, a):
        own = owner(a)
        if not self.space.holds(own):
            return a
        base = self.real.get(id(own))
        backend = self.space.backend
        if base is None:
            size = getattr(own, "nbytes", None)
            size = own.size if size is None else size
            base = self.real[id(own)] = backend.empty((max(size, 1),), np.uint8)
        return backend.view(base, address(a) - owner_address(own), a.shape, a.dtype, a.strides)
