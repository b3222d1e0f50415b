"""The expression IR: immutable nodes that describe a computation and compute nothing.

A node has an op, args, shape, dtype and device, fixed at construction. Type promotion follows
NumPy exactly (each op's rule comes from the op table); where an operand's dtype differs from the
op's loop dtype, an explicit `astype` node is inserted, so code generators see exact types.
"""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.ops import OPS
from lazytensor.operand import Operand
from lazytensor import dtypes as _dt
from lazytensor.shapes import broadcast_shapes


class Const:
    """A scalar in an expression; its value becomes a kernel argument, never source text."""
    __slots__ = ("value", "dtype")
    shape = ()
    device = None
    heavy = False

    def __init__(self, value, dtype):
        self.value = value
        self.dtype = dtype


class Expr(Operand):
    __slots__ = ("op", "args", "shape", "dtype", "device", "heavy", "attrs", "_lowered")

    def __init__(self, op: str, args: tuple, shape: tuple, dtype: np.dtype, device, heavy=False, attrs=None):
        self.op = op
        self.args = args
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.heavy = heavy          # a node that is not elementwise (reduction, conv) lies below
        self.attrs = attrs          # op parameters that are part of the structure (e.g. an axis)
        self._lowered = None        # memo of the lowering, see lazytensor.lower

    def __repr__(self):
        from lazytensor.render_tree import render_tree
        return (f"Expr({render_tree(self)}, shape={self.shape}, dtype={self.dtype.name}, "
                f"device={self.device!r})")


_rules: dict = {}


def _resolve(op: str, types: tuple):
    key = (op, types)
    rule = _rules.get(key)
    if rule is None:
        try:
            rule = OPS[op].dtype_rule(types)
        except Exception as exc:   # NumPy's own words: which op, which input types
            names = ", ".join(t.name if isinstance(t, np.dtype) else f"Python {t.__name__}" for t in types)
            rule = TypeError(f"{op} is not supported for ({names}): {exc}")
        _rules[key] = rule
    if isinstance(rule, Exception):
        raise TypeError(str(rule))
    return rule


def _device_of(devices) -> str | None:
    device = None
    for d in devices:
        if d is not None and d != device:
            if device is not None:
                raise ValueError(f"expression mixes devices {device!r} and {d!r}: move one operand with "
                                 f"lt.asarray(x, device={device!r})")
            device = d
    return device


def astype(node, dtype) -> "Expr":
    dtype = _dt.check_supported(dtype)
    if node.dtype == dtype:
        return node
    return Expr("astype", (node,), node.shape, dtype, node.device, node.heavy)


def apply(op: str, *operands) -> Expr:
    """Build the node for `op(*operands)`; operands are nodes or scalars. This runs for every
    operator a user writes, so it is kept to a handful of dict lookups."""
    types = []
    for x in operands:
        if isinstance(x, Operand):
            types.append(x.dtype)
        elif isinstance(x, np.ndarray):
            return apply(op, *[_tensor.as_node(y) if isinstance(y, np.ndarray) else y for y in operands])
        else:
            types.append(_dt.operand_type(x))
    key = (op, tuple(types))
    rule = _rules.get(key)
    if rule is None or isinstance(rule, Exception):
        rule = _resolve(op, key[1])
    loop, out = rule
    args = []
    heavy = False
    device = None
    for x, want in zip(operands, loop):
        if not isinstance(x, Operand):
            x = Const(_dt.scalar_value(x, want), want)
        else:
            if x.dtype != want:
                x = Expr("astype", (x,), x.shape, want, x.device, x.heavy)
            if x.heavy:
                heavy = True
            d = x.device
            if d is not device:
                device = _device_of((device, d))
        args.append(x)
    if len(args) == 2:
        s0, s1 = args[0].shape, args[1].shape
        shape = s0 if s0 == s1 else broadcast_shapes(s0, s1)
    elif len(args) == 1:
        shape = args[0].shape
    else:
        shape = broadcast_shapes(*(a.shape for a in args))
    return Expr(op, tuple(args), shape, out, device, heavy)


from lazytensor import tensor as _tensor  # noqa: E402  (NumPy arrays in expressions become CPU tensors)
