"""Which live expressions read which memory, so that a write can keep their values (see
lazytensor.assign.writes).

An expression's value is the one its tensors had when it was built. Every node that takes a Tensor
as a direct operand registers itself, by weak reference, with that tensor's memory: one record per
allocation (memory.owner), shared by every Tensor over it, views included. A write to any of them
first settles the live readers the record lists; a dead reader costs nothing but its slot, which
the record drops when its list has doubled since the last sweep.
"""
from __future__ import annotations

import weakref

from lazytensor.core.memory import owner


class Memory(list):
    """The readers of one allocation: weak references to the nodes that read it directly (the
    list itself, so that registering is one append)."""
    __slots__ = ("limit", "version", "origins", "origins_limit", "__weakref__")

    def __init__(self):             # (an empty list already: list.__init__ has nothing to do)
        self.limit = 16             # sweep out dead references when the list grows past this
        self.version = 0            # writes through lazytensor so far (an evaluated node's origin checks it)
        self.origins = []           # weak references to the WriteCounts that record this memory's version
        self.origins_limit = 16

    def keep_origin(self, ref) -> None:
        """Write counts (a WriteCounts, by weak reference) recorded this memory's version."""
        origins = self.origins
        origins.append(ref)
        if len(origins) > self.origins_limit:
            origins[:] = [r for r in origins if r() is not None]
            self.origins_limit = 2 * len(origins) + 16

    def drop_stale_origins(self) -> None:
        """Let the Origins that a write since made stale drop their operands: a gradient through
        them is refused anyway (Origin.stale), and the expressions they held (a kept loss's whole
        forward) would otherwise stay live readers of this memory, computed before each write."""
        kept = []
        for r in self.origins:
            counts = r()
            if counts is not None and counts.drop_stale(self):
                kept.append(r)
        self.origins[:] = kept

    def sweep(self) -> list:
        """The live readers (the list keeps only their references)."""
        self[:] = [r for r in self if r() is not None]
        self.limit = 2 * len(self) + 16
        return [node for node in (r() for r in self) if node is not None]

    def read(self) -> bool:
        """Whether a live node may still read this memory's values: one not evaluated, or whose
        result is this memory (a write settles those first, lazytensor.assign.writes). The list
        keeps only their references: the others never need settling for this memory again."""
        self[:] = [r for r in self if (node := r()) is not None
                   and (node.result is None or node.result.memory is self)]
        self.limit = 2 * len(self) + 16
        return bool(self)


# id(owner) -> a weak reference to its record. A record lives as long as a Tensor that looked it up
# (t.memory), and such a Tensor keeps its owner alive, so an id is never reused while its record
# exists: an entry whose record died is stale, replaced when its id comes again, and dropped by a
# sweep of the table when it has doubled (no callback per record: a result's record is made on
# every evaluation).
_records: dict = {}
_records_limit = [1024]


def memory_of(t) -> Memory:
    """The record of the allocation Tensor `t` views (looked up once per Tensor)."""
    m = t.memory
    if m is None:
        key = id(owner(t.data))
        r = _records.get(key)
        m = None if r is None else r()
        if m is None:
            m = Memory()
            _records[key] = weakref.ref(m)
            if len(_records) > _records_limit[0]:
                _sweep_records()
        t.memory = m
    return m


def record_of(own) -> Memory | None:
    """The record of the allocation `own` (memory.owner of an array), if a Tensor made one."""
    r = _records.get(id(own))
    return None if r is None else r()


def _sweep_records() -> None:
    for key in [k for k, r in _records.items() if r() is None]:
        del _records[key]
    _records_limit[0] = 2 * len(_records) + 1024


def register(node, ref, t) -> None:
    """`node` (whose weak reference is `ref`) reads Tensor `t` directly."""
    m = t.memory
    if m is None:
        m = memory_of(t)
    m.append(ref)
    if len(m) > m.limit:
        m.sweep()


def unregister(node, t) -> None:
    """`node` no longer reads Tensor `t`: for a node that nothing can evaluate any more (a gather
    that a masked write consumed, lazytensor.ops.masked), so that the write need not settle it."""
    m = memory_of(t)
    m[:] = [r for r in m if r() is not node]
