"""`float(x.sum())`: the value of a full reduction of a CPU tensor, as a Python scalar, in one call.

The general path evaluates a reduction node into a new Tensor, which the node keeps as its result
(docs/guide/arrays.md, "Values stay values"), and reads the value from it: planning, a step, a Tensor and the
record of its readers, several times the kernel's own time on small arrays. For
the one value of a reduction of all the axes of a CPU Tensor (`float(x.sum())`, `x.max().item()`,
`bool(m.any())`) this path launches the same kernel the plan would (the program of a load of x,
the node's own spec: the backend keeps that launch, lazytensor.kernels.cpu.backend) into a 0-d array of
its own and returns its value; once that launch is kept, the same kernels in one call that returns
the value (the backend's flat_reduction_value). The node keeps no result: it stays a reader of x, so a later write
to x evaluates it first if it is still alive, and asking for its value again computes it again.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import Tensor
from lazytensor.assign.direct import flat_of
from lazytensor.plan.lower import tree_program

# (id of a reduction's spec, structure id of its tensor) -> (that spec, the program of a load of the
# tensor, its backend): what a repeated `float(x.sum())` looks up once. The entry holds the spec, so
# its id is not reused while the entry lives (reduce() may drop its own table of specs).
_known: dict = {}


def reduced_scalar(node):
    """The value of `node`, an unevaluated reduction, as a Python scalar; None (nothing done) where
    it is not the full reduction of a CPU Tensor: the caller then evaluates it."""
    x = node.args[0]
    if type(x) is not Tensor or x.device != "cpu" or node.shape:
        return None
    spec = node.attrs
    key = (id(spec), x.skey)
    known = _known.get(key)
    if known is None or known[0] is not spec:
        if len(_known) > 4096:
            _known.clear()
        known = _known[key] = (spec, tree_program(x, x.dtype), x.backend)
    _, program, backend = known
    # (the node's spec was made for x's shape: x is its operand as it is, not a raveled view)
    if (x.flat or flat_of(x))[1]:
        value = backend.flat_reduction_value(program, spec, [x.data], ())
        if value is not None:
            return value
        run = backend.run_flat_reduction
    else:
        run = backend.run_reduction
    out = np.empty((), node.dtype)
    run(program, spec, out, [x.data], ())
    return out.item()
