"""Planning over address space alone: the temporaries of a plan whose memory comes later.

A plan made for one run allocates each temporary as its builder asks (the backend's `empty`). A
recorded plan (lazytensor.plan.recorded) then rebuilds its steps over ONE arena packed by lifetime
(lazytensor.plan.memory_plan) and drops those allocations: they only told the memory plan each
temporary's size, layout and which steps touch it. Allocated for real they cost the sum of every
temporary of the step at once, far more than the arena (VGG16-BN at 32 px, batch 512, in AMP: 1.67 GB
against a 0.68 GB arena), and that sum was the peak of a training step's first call.

So while a recorded plan is planned, the backend hands out placeholders: arrays of the asked shape
and dtype over addresses of their own that hold no memory. On CUDA a placeholder points into a
range of addresses no allocation can have (above 2^52, beyond any GPU's virtual address space), so
nothing may read or write it; on the CPU it is a NumPy array whose pages the OS never commits
because nothing touches them, made read-only so that a write while planning fails here, as it
would fault on the GPU. Planning only builds steps (kernels compile and cuDNN plans are measured
on the first run, over the arena), so nothing touches them; a placeholder that would outlive the
planning other than as a step's temporary (an expression evaluated while planning) is an error
(MemoryPlan checks).
"""
from __future__ import annotations

import math
import threading

import numpy as np

_FIRST_ADDRESS = 1 << 52        # above the 49-57 bit virtual address spaces of CUDA devices
_ALIGNMENT = 512
_next_address = [_FIRST_ADDRESS]
_lock = threading.Lock()


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
        self.backend.empty = self.empty
        return self

    def __exit__(self, *exc):
        if self._previous is None:
            del self.backend.empty
        else:
            self.backend.empty = self._previous
        return False

    def empty(self, shape, dtype):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        dtype = np.dtype(dtype)
        if self.backend.name == "cuda":
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
