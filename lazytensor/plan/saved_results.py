"""Which saved-result arrays hold a completed forward pass.

A training batch_norm hands its backward pass arrays through a BatchNormSaved holder (saved
statistics, the conv output, the ReLU mask). Planning the forward already puts fresh, unwritten
arrays there (lt.explain plans without running), so the holder alone cannot tell whether its
arrays were computed. The forward's last step (cbr_plan.CommitStep) therefore marks them: once it
has run, its arrays are known to hold a completed forward. A plan recipe rebinds the step to each
call's own arrays, and a CUDA graph replay hands out only arrays its capture marked (the graph writes
them again before anyone can read them), so the mark follows the arrays, never a stale value.
"""
from __future__ import annotations

import weakref

_written: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()   # id(array) -> array
_strong: dict = {}          # arrays that take no weak reference: id -> array (bounded below)
_MAX_STRONG = 4096


def mark(arrays) -> None:
    for a in arrays:
        try:
            _written[id(a)] = a
        except TypeError:
            if len(_strong) >= _MAX_STRONG:
                _strong.pop(next(iter(_strong)))
            _strong[id(a)] = a


def written(a) -> bool:
    """True when `a` (this very array object) was written by a forward that ran to its end."""
    return _written.get(id(a)) is a or _strong.get(id(a)) is a


def forget(arrays) -> None:
    """The arrays no longer hold a forward's results (a holder released them)."""
    for a in arrays:
        _written.pop(id(a), None)
        _strong.pop(id(a), None)
