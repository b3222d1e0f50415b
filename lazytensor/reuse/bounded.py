"""Tables that keep a bounded number of entries: the oldest goes first."""
from __future__ import annotations

_NONE = object()


def make_room(table: dict, limit: int, release=None) -> None:
    """Drop `table`'s oldest entry if it holds `limit` or more; release(value) is called on it.
    Threads may share a table: one that finds the entry gone (another thread dropped it) does nothing."""
    if len(table) < limit:
        return
    try:
        value = table.pop(next(iter(table)), _NONE)
    except (RuntimeError, StopIteration):       # changed or emptied by another thread meanwhile
        return
    if value is not _NONE and release is not None:
        release(value)
