"""A numba kernel's compiled entry, called without the dispatcher.

Calling a numba dispatcher resolves the numba type of every argument and looks the signature up
among its overloads: about 0.3 us a call, a third of a 1k-element kernel. The overload's own entry
point (`CompileResult.entry_point`) unboxes the arguments for the types it was compiled for and
runs: it does NOT check them (an array of another dtype or rank would be read as the compiled
type's). So an entry is kept only where the caller knows that every later call passes arguments of
the same numba types as the call that found it:
  - arrays of the same dtypes and rank, C-contiguous and aligned (read-only-ness does not matter
    to the compiled code: numba types it apart, but reads the same memory the same way);
  - scalars of the same Python types: a Const's value has one Python type per dtype kind
    (lazytensor.core.expr.Const), and a program fixes its scalars' dtypes;
  - Python ints for sizes and counts, a float for a count.
lazytensor.kernels.cpu.backend keeps them by program and rank, for the serial kernels of small arrays,
where the dispatcher's share is largest.
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
