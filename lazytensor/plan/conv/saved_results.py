"""Which saved-result arrays hold a completed forward pass.

A training batch_norm hands its backward pass arrays through a BatchNormSaved holder (saved
statistics, the conv output, the ReLU mask). Planning the forward already puts fresh, unwritten
arrays there (lt.explain plans without running), so the holder alone cannot tell whether its
arrays were computed. The forward's last step (lazytensor.plan.conv.steps.CommitStep) therefore
marks them: once it has run, its arrays are known to hold a completed forward. A plan recipe
rebinds the step to each call's own arrays, and a CUDA graph replay hands out only arrays its
capture marked (the graph writes them again before anyone can read them), so the mark follows the
arrays, never a stale value.
"""
from __future__ import annotations

import weakref

_written: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()   # id(array) -> array
# (NumPy and CuPy arrays take weak references: an entry goes with its array, so a later array
# that reuses the id is never taken for a written one)


def mark(arrays) -> None:
    for a in arrays:
        _written[id(a)] = a


def written(a) -> bool:
    """True when `a` (this very array object) was written by a forward that ran to its end."""
    return _written.get(id(a)) is a
