"""A numba kernel's compiled entry, called without the dispatcher.

Design: docs/design/kernels.md, section "kernels/cpu/numba_entry.py".
"""
from __future__ import annotations


def compiled_entry(dispatcher, args):
    """(entry point, dispatcher) of the overload `dispatcher` ran for `args` (the dispatcher is kept
    with it: it owns the compiled code); False where there is none for exactly these types (numba
    converted an argument to an overload of other types), so the caller keeps the dispatcher."""
    try:
        signature = tuple(dispatcher.typeof_pyval(a) for a in args)
    except Exception:           # (a type numba does not know: the dispatcher raised already)
        return False
    compiled = dispatcher.overloads.get(signature)
    return False if compiled is None else (compiled.entry_point, dispatcher)
