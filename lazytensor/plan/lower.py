"""Lowering: an elementwise expression DAG to a kernel program plus its run-time arguments.

The common case costs two dict lookups: every node already knows its structure id, the tensors
it reads and its scalars (see Expr), so when no tensor is read twice and no subexpression is
shared, the program is found by (structure id, destination dtype) and the arguments are the
leaves' arrays. Otherwise one walk over the DAG numbers each distinct node once: an expression
object used twice is computed once per element, a tensor read twice is one kernel argument.
"""
from __future__ import annotations

from lazytensor.core.expr import Const
from lazytensor.kernels.program import multi_output_program, program_for
from lazytensor.core.tensor import Tensor

_programs: dict = {}   # (structure id, out dtype) -> program, for DAGs that are trees over distinct leaves


def lower(root, out_dtype):
    """-> (program, input arrays, scalar values) for evaluating `root` into a `out_dtype` array."""
    leaves = root.leaves
    if not root.shared and (len(leaves) < 2 or len(set(leaves)) == len(leaves)):
        return tree_program(root, out_dtype), [t.data for t in leaves], list(root.scalars)
    return _walk(root, out_dtype)


def tree_program(root, out_dtype):
    """The program of `root`, a tree over distinct leaves (not `shared`, no tensor twice), found by
    its structure id: its inputs are root.leaves' arrays and its scalars root.scalars, in order."""
    key = (root.skey, out_dtype)
    program = _programs.get(key)
    if program is None:
        program = _programs.setdefault(key, _walk(root, out_dtype)[0])
    return program


def _walk(root, out_dtype):
    instrs, ids, inputs, scalars, scalar_dtypes = _number([root])
    program = program_for(tuple(instrs), len(inputs), tuple(scalar_dtypes), out_dtype)
    return program, inputs, scalars


def lower_many(roots, out_dtypes):
    """-> (program, input arrays, scalar values) for evaluating every expression of `roots` (of one
    iteration space) into arrays of `out_dtypes`: ONE program with an output per root, in which a
    node the roots share, or a node built twice from the same operands, is computed once."""
    instrs, ids, inputs, scalars, scalar_dtypes = _number(roots, merge_equal=True)
    outputs = tuple((ids[id(r)], dtype) for r, dtype in zip(roots, out_dtypes))
    return multi_output_program(tuple(instrs), len(inputs), tuple(scalar_dtypes), outputs), inputs, scalars


def _number(roots, merge_equal=False):
    """One walk over the DAG of `roots`, numbering each distinct node once; merge_equal: also two
    nodes of one op over the same values (`a * b` built twice), as the several results of
    lt.evaluate(e1, e2) often repeat their common parts. Scalars stay apart: their values are
    not part of a program's structure, so every place a Const stands in is an argument of its
    own, numbered left to right as `Expr.scalars` lists them (one Const object used twice, as
    `e.reshape(3, 2) * e.reshape(3, 2)` shares e's, still counts twice: the program found by
    structure id must take the arguments that lower's common case passes)."""
    values = {}         # instruction -> value id, when merge_equal
    instrs = []
    ids = {}            # id(node) -> value id; (id(parent), position) -> value id of a Const operand
    inputs = []
    input_ids = {}      # id(tensor) -> input index
    scalars = []
    scalar_dtypes = []
    stack = [(root, id(root)) for root in reversed(roots)]     # (node, where its value id goes) or (node, None): expand
    while stack:
        node, place = stack.pop()
        t = type(node)
        if t is Const:
            instrs.append(("scalar", node.dtype, len(scalars)))
            scalars.append(node.value)
            scalar_dtypes.append(node.dtype)
            ids[place] = len(instrs) - 1
            continue
        key = id(node)
        if place is not None and key in ids:
            continue
        if t is Tensor:
            slot = input_ids.get(key)
            if slot is None:
                slot = input_ids[key] = len(inputs)
                inputs.append(node.data)
            instrs.append(("load", node.dtype, slot))
        elif place is None:
            ins = (node.op, node.dtype, *[ids[(key, i) if type(a) is Const else id(a)]
                                          for i, a in enumerate(node.args)])
            if merge_equal:
                vid = values.get(ins)
                if vid is not None:
                    ids[key] = vid
                    continue
                values[ins] = len(instrs)
            instrs.append(ins)
        else:
            stack.append((node, None))
            args = node.args
            for i in range(len(args) - 1, -1, -1):
                a = args[i]
                if type(a) is Const:
                    stack.append((a, (key, i)))
                elif id(a) not in ids:
                    stack.append((a, id(a)))
            continue
        ids[key] = len(instrs) - 1
    return instrs, ids, inputs, scalars, scalar_dtypes
