"""NumPy's `out=` for the functions built from other nodes: the result written into a tensor
that is given (one assignment), and that tensor returned."""
from __future__ import annotations

import numpy as np


def to_out(result, out):
    """`result`, or `out` after `out[...] = result` when out is given (a tensor of result's shape;
    NumPy's same_kind casting, as every assignment)."""
    if out is None:
        return result
    if isinstance(out, tuple):
        if len(out) != 1:
            raise TypeError(f"out= takes one tensor here, got a tuple of {len(out)}")
        (out,) = out
    if isinstance(out, np.ndarray):
        raise TypeError("out= a NumPy array: lazytensor writes tensors; wrap it first with "
                        "y = lt.asarray(array), which shares its memory on the CPU")
    if not hasattr(out, "data") or not hasattr(out, "shape"):
        raise TypeError(f"out= must be a tensor, not {type(out).__name__}")
    if tuple(out.shape) != tuple(result.shape):
        raise ValueError(f"out= has shape {tuple(out.shape)}; the result has shape {tuple(result.shape)}")
    from lazytensor.assign.evaluate import assign
    assign(out, result)
    return out
