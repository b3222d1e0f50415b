"""Lowering: an elementwise expression DAG to a kernel program plus its run-time arguments.

One walk over the DAG (iterative, so deep expressions do not hit Python's recursion limit) numbers
each distinct node once: an expression object used twice is computed once per element, a Tensor
read twice is one kernel argument. The result is memoized on the root, so re-assigning the same
expression object skips the walk.
"""
from __future__ import annotations

from lazytensor.expr import Const
from lazytensor.kernels.program import program_for
from lazytensor.tensor import Tensor


def lower(root, out_dtype):
    """-> (program, input arrays, scalar values) for evaluating `root` into a `out_dtype` array."""
    memo = root._lowered if hasattr(root, "_lowered") else None
    if memo is not None and memo[0].out_dtype == out_dtype:
        return memo
    instrs = []
    ids = {}            # id(node) -> value id
    inputs = []
    input_ids = {}      # id(tensor) -> input index
    scalars = []
    scalar_dtypes = []
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if key in ids:
            continue
        t = type(node)
        if t is Tensor:
            slot = input_ids.get(key)
            if slot is None:
                slot = input_ids[key] = len(inputs)
                inputs.append(node.data)
            instrs.append(("load", node.dtype, slot))
        elif t is Const:
            instrs.append(("scalar", node.dtype, len(scalars)))
            scalars.append(node.value)
            scalar_dtypes.append(node.dtype)
        elif expanded:
            instrs.append((node.op, node.dtype, *[ids[id(a)] for a in node.args]))
        else:
            stack.append((node, True))
            for a in reversed(node.args):
                if id(a) not in ids:
                    stack.append((a, False))
            continue
        ids[key] = len(instrs) - 1
    # The result must be the last instruction (it is, unless the root itself was visited early).
    program = program_for(tuple(instrs), len(inputs), tuple(scalar_dtypes), out_dtype)
    lowered = (program, inputs, scalars)
    if hasattr(root, "_lowered"):
        root._lowered = lowered
    return lowered
