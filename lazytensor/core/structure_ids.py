"""Structure ids: one small int per distinct structure of a node (op, dtype, attrs, operand
structures), so that a node's structural key is computed once, at construction, and compared as
an int."""
from __future__ import annotations

_structures: dict = {}


def structure_id(key: tuple) -> int:
    """A small int per distinct structure (op, dtype, attrs, operand structures): the
    structural key of a node, computed once, at construction."""
    sid = _structures.get(key)
    if sid is None:
        sid = _structures.setdefault(key, len(_structures))
    return sid
