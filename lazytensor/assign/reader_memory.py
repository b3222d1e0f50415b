"""Memory for the values of the live expressions that read a destination (lazytensor.assign.writes),
handed the same arrays call after call once nothing holds the earlier ones.

A training loop's optimizer step writes the parameters while the caller still holds the
gradients (`opt.step(lt.grad(loss, params))`): each gradient keeps its value in memory of its own.
Fresh memory each step would give the step new addresses each time, and a step whose addresses
change is never replayed as a CUDA graph (lazytensor.reuse.replay keys graphs by addresses). So
the k-th reader of a given shape, dtype and device gets back the array the previous such call
gave out, when no Tensor, view or array of it is left (the previous step's gradients are dead by
then). One still held is never reused: values stay values.

Bounded: at most MAX_ARRAYS arrays and MAX_BYTES bytes kept, the oldest dropped first; release()
drops them all (lt.release_graphs() calls it).
"""
from __future__ import annotations

import sys
import weakref

from lazytensor.core.readers import record_of, register
from lazytensor.core.memory import owner
from lazytensor.core.tensor import Tensor, empty
from lazytensor.reuse import replay

MAX_ARRAYS = 256
MAX_BYTES = 1 << 30
_kept: dict = {}        # (device, shape, dtype, k) -> (array,): the table's one reference to it
_bytes = [0]


def _free(entry) -> bool:
    """Whether nothing but `entry` refers to its array or to the allocation under it: the two
    references counted are the entry's and getrefcount's own argument."""
    return sys.getrefcount(entry[0]) == 2 and sys.getrefcount(owner(entry[0])) == 2


def _moved(entry) -> bool:
    """Where the array is held only as the value of live expressions (a loss the caller keeps in a
    list), gives those expressions a copy of it (same values: values stay values) and so frees the
    array for this call, which then keeps its addresses (one small copy instead of a step whose
    CUDA graph cannot replay). False, touching nothing, where anything else holds the array, a view
    of it or the Tensor over it."""
    if sys.getrefcount(entry[0]) != 3:          # the entry's, the argument's and one Tensor's `data`
        return False
    own = owner(entry[0])
    if own is not entry[0] and sys.getrefcount(own) != 3:     # its array's, `own` and the argument
        return False
    record = record_of(own)
    del own
    if record is None:
        return False
    holders = [node for node in record.sweep() if node.result is not None and node.result.data is entry[0]]
    if not holders:
        return False
    t = holders[0].result
    # the Tensor's references: each holder's `result`, `t` and the argument
    if any(n.result is not t for n in holders) or sys.getrefcount(t) != len(holders) + 2:
        return False
    copy = Tensor(t.data.copy(), t.device)
    for node in holders:
        node.result = copy
        register(node, weakref.ref(node), copy)
    del holders, t
    return _free(entry)


def memory_for(readers) -> list:
    """A Tensor per reader, of its shape, dtype and device: a kept array where nothing holds it."""
    out = []
    counts: dict = {}
    for node in readers:
        kind = (node.device, tuple(node.shape), node.dtype)
        k = counts[kind] = counts.get(kind, -1) + 1
        key = (*kind, k)
        entry = _kept.pop(key, None)
        if entry is not None:
            _bytes[0] -= entry[0].nbytes
            if not (_free(entry) or _moved(entry)):
                entry = None
        if entry is not None:
            t = Tensor(entry[0], node.device)
        else:
            t = empty(kind[1], kind[2], kind[0])
            entry = (t.data,)
        out.append(t)
        _store(key, entry)
    return out


def _store(key, entry) -> None:
    nbytes = entry[0].nbytes
    if nbytes > MAX_BYTES // 4:
        return                          # too large to hold on to after its readers are gone
    while _kept and (len(_kept) >= MAX_ARRAYS or _bytes[0] + nbytes > MAX_BYTES):
        _bytes[0] -= _kept.pop(next(iter(_kept)))[0].nbytes
    _kept[key] = entry
    _bytes[0] += nbytes


def release() -> None:
    _kept.clear()
    _bytes[0] = 0


replay.ON_RELEASE.append(release)
