"""Plans with no heavy part: one fused kernel writing the destination, or two where the destination
is also read through a different index map (an overlapping view), since NumPy's "right side first"
semantics then need the expression evaluated into a temporary first."""
from __future__ import annotations

import numpy as np

from lazytensor.core.memory import address as _address, may_overlap, owner
from lazytensor.kernels.program import program_for
from lazytensor.plan.lower import lower
from lazytensor.plan.steps import FusedElementwise


def aliased(out, inputs) -> bool:
    """True when an input shares memory with `out` but is read through another index map."""
    ob = None
    for a in inputs:
        if a is out:
            continue
        if ob is None:
            ob = owner(out)
        # (a NumPy array without a base owns itself; a CuPy array's owner is its allocation)
        if (a if type(a) is np.ndarray and a.base is None else owner(a)) is not ob:
            continue
        if a.shape == out.shape and a.strides == out.strides and _address(a) == _address(out):
            continue
        if may_overlap(a, out):
            return True
    return False


def copy_step(backend, src, out, note) -> FusedElementwise:
    """out[...] = src as one kernel (strides and broadcasting in its indexing)."""
    program = program_for((("load", src.dtype, 0),), 1, (), out.dtype)
    return FusedElementwise(backend, program, out, [src], [], note=note)


def elementwise_steps(root, out, backend) -> list:
    """The steps of `out[...] = root` for an expression with no heavy part: one kernel (two where the
    destination is read through another index map)."""
    program, inputs, scalars = lower(root, out.dtype)
    if not aliased(out, inputs):
        return [FusedElementwise(backend, program, out, inputs, scalars)]
    tmp = backend.empty(out.shape, out.dtype)
    return [FusedElementwise(backend, program, tmp, inputs, scalars,
                             note="the destination is read through another index map: evaluated into a temporary"),
            copy_step(backend, tmp, out, "copy the temporary into the destination")]
