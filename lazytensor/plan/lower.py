"""Lowering: an elementwise expression DAG to a kernel program plus its run-time arguments.

The common case costs two dict lookups: every node already knows its structure id, the tensors
it reads and its scalars (see Expr), so when no tensor is read twice and no subexpression is
shared, the program is found by (structure id, destination dtype) and the arguments are the
leaves' arrays. Otherwise one walk over the DAG numbers each distinct node once: an expression
object used twice is computed once per element, a tensor read twice is one kernel argument.
"""
from __future__ import annotations

from lazytensor.core.expr import Const, Expr
from lazytensor.kernels.program import program_for
from lazytensor.core.tensor import Tensor

_programs: dict = {}   # (structure id, out dtype) -> program, for DAGs that are trees over distinct leaves


def lower(root, out_dtype):
    """-> (program, input arrays, scalar values) for evaluating `root` into a `out_dtype` array."""
    leaves = root.leaves
    if not root.shared and (len(leaves) < 2 or len(set(leaves)) == len(leaves)):
        key = (root.skey, out_dtype)
        program = _programs.get(key)
        if program is None:
            program = _programs.setdefault(key, _walk(root, out_dtype)[0])
        return program, [t.data for t in leaves], list(root.scalars)
    return _walk(root, out_dtype)


def _walk(root, out_dtype):
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
    program = program_for(tuple(instrs), len(inputs), tuple(scalar_dtypes), out_dtype)
    return program, inputs, scalars
