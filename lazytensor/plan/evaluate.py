"""Evaluation happens here and only here: on assignment, or when a value is asked for."""
from __future__ import annotations

import numpy as np

from lazytensor.core import dtypes as _dt
from lazytensor.core.expr import Const, Expr
from lazytensor.core.operand import Operand
from lazytensor.core.memory import address as _address
from lazytensor.plan.planner import plan
from lazytensor.core.shapes import check_assignable
from lazytensor.core.tensor import Tensor, asarray, empty


def _as_expression(value, dest: Tensor):
    if isinstance(value, Operand):
        return value
    if isinstance(value, (np.ndarray, list, tuple)) or hasattr(value, "__cuda_array_interface__"):
        return asarray(value, device=dest.device)
    t = _dt.operand_type(value)
    if isinstance(t, np.dtype):
        return Const(_dt.scalar_value(value, t), t)
    # A weak Python scalar takes the destination's dtype when its kind allows (NEP 50).
    kind = dest.dtype.kind
    if (t is float and kind in "biu") or (t is int and kind == "b"):
        raise TypeError(f"cannot assign a Python {t.__name__} to a {dest.dtype.name} tensor under the "
                        f"'same_kind' casting rule")
    return Const(_dt.scalar_value(value, dest.dtype), dest.dtype)


def assign(dest: Tensor, value, what: str = "assign") -> None:
    """dest[...] = value, as one fused kernel when value is elementwise."""
    if type(value) is Expr:
        memo = value.last_plan
        if memo is not None and memo[0] is dest.data:
            # The same expression into the same memory again: its plan still holds (expressions
            # and the arrays of tensors never change), so only the kernel runs.
            for step in memo[1]:
                step.run()
            return
    if not getattr(getattr(dest.data, "flags", None), "writeable", True):
        raise ValueError("assignment destination is read-only (a read-only NumPy array, or a view such as "
                         "broadcast_to's); assign into a writable tensor, e.g. y = x.copy()")
    node = _as_expression(value, dest)
    if node.device is not None and node.device != dest.device:
        raise ValueError(f"cannot {what} an expression on {node.device!r} to a tensor on {dest.device!r}")
    if node.shape != dest.shape:
        check_assignable(node.shape, dest.shape)
    if node.dtype != dest.dtype:
        _dt.check_cast(node.dtype, dest.dtype, what)
    if type(node) is Tensor and _same_memory(node.data, dest.data):
        return                      # `y[k] += e` writes y[k] back onto itself: nothing to do
    steps = plan(node, dest.data, dest.backend, replay=True)
    for step in steps:
        step.run()
    if type(node) is Expr and not node.heavy:
        node.last_plan = (dest.data, steps)


def _same_memory(a, b) -> bool:
    if a is b:
        return True
    return (a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
            and type(a) is type(b) and _address(a) == _address(b))


def evaluate(expr) -> Tensor:
    """A new Tensor holding the value of `expr` (a Tensor is returned as it is)."""
    if isinstance(expr, Tensor):
        return expr
    if not isinstance(expr, Operand):
        return asarray(expr)
    dest = empty(expr.shape, expr.dtype, expr.device)
    assign(dest, expr)
    return dest


def to_numpy(x) -> np.ndarray:
    t = evaluate(x)
    return t.backend.to_host(t.data)
