"""The array library of a device (NumPy on the CPU, CuPy on CUDA, imported on first use), for the
functions that are no elementwise work to fuse (sort, gather, scans, ...): they evaluate their
operand and call the library on its array, which stays on its device."""
from __future__ import annotations

from lazytensor.core.tensor import Tensor


def array_module(device: str):
    if device == "cuda":
        import cupy
        return cupy
    import numpy
    return numpy


def evaluated(x) -> Tensor:
    """x as a tensor: an expression is evaluated (one fused kernel; it keeps the result), a tensor is
    itself, not a copy (the library calls here never write their operands)."""
    from lazytensor.assign.evaluate import result_of
    from lazytensor.core.operand import Operand
    from lazytensor.core.tensor import as_node
    return result_of(x if isinstance(x, Operand) else as_node(x))
