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
from lazytensor.kernels.backend import live_backends
from lazytensor.kernels.device_memory import as_out_of_memory, is_out_of_memory
from lazytensor.plan.replay import release_all
from lazytensor.plan.steps import run_steps


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
    """dest[...] = value, as one fused kernel when value is elementwise. Out of GPU memory before
    anything the caller holds was written, the memory CUDA graphs keep is freed and the assignment
    tried once more; then a DeviceOutOfMemory says what was being allocated."""
    try:
        _assign(dest, value, what)          # the hot path: one call, a try that costs nothing
        return
    except Exception as e:
        if not is_out_of_memory(e):
            raise
        error = _planning_error(e)
        if not error.untouched:
            _reraise(error, e)
    retry_out_of_memory(lambda: _assign(dest, value, what), retried=True)


_PLANNING = "while planning (taking the plan's temporaries)"


def retry_out_of_memory(run, retried: bool = False, where: str = _PLANNING):
    """run(), once more after freeing what lazytensor keeps on the device if it ran out of GPU memory
    before writing anything the caller holds (retried: that happened already; free and run once).
    where: what was being done, for an error no step raised."""
    if not retried:
        try:
            return run()
        except Exception as e:
            if not is_out_of_memory(e):
                raise
            error = _planning_error(e, where)
            if not error.untouched:
                _reraise(error, e)
    free_device_memory()
    try:
        return run()
    except Exception as e:
        if not is_out_of_memory(e):
            raise
        error = _planning_error(e, where)
        error.retried = True
        _reraise(error, e)


def _planning_error(e, where: str = _PLANNING):
    """`e` as a DeviceOutOfMemory; one not raised by a step was raised before any ran (nothing written)."""
    error = as_out_of_memory(e, "the plan's temporaries")
    if error.untouched is None:
        error.context.append(where)
        error.untouched = True
    return error


def _reraise(error, cause):
    if error is cause:
        raise error
    raise error from cause


def free_device_memory() -> None:
    """Give back what lazytensor keeps on the device: the CUDA graphs' temporaries, then the memory
    pools' free blocks."""
    release_all()
    for backend in live_backends():
        free = getattr(backend, "free_cached_memory", None)
        if free is not None:
            free()


def _assign(dest: Tensor, value, what: str) -> None:
    if type(value) is Expr:
        memo = value.last_plan
        if memo is not None and memo[0] is dest.data:
            # The same expression into the same memory again: its plan still holds (expressions
            # and the arrays of tensors never change), so only the kernel runs.
            run_steps(memo[1], dest.data)
            return
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
    run_steps(steps, dest.data)
    if type(node) is Expr and not node.heavy:
        node.last_plan = (dest.data, steps)


def _same_memory(a, b) -> bool:
    if a is b:
        return True
    return (a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
            and type(a) is type(b) and _address(a) == _address(b))


def evaluate(expr, *more):
    """A new Tensor holding the value of `expr` (a Tensor is returned as it is); with several
    expressions, a tuple of them, evaluated together (lazytensor.plan.simultaneous)."""
    if more:
        from lazytensor.plan.simultaneous import evaluate_all
        return evaluate_all((expr, *more))
    if isinstance(expr, Tensor):
        return expr
    if not isinstance(expr, Operand):
        return asarray(expr)
    dest = retry_out_of_memory(lambda: empty(expr.shape, expr.dtype, expr.device), where="for the result")
    assign(dest, expr)
    return dest


def to_numpy(x) -> np.ndarray:
    t = evaluate(x)
    return t.backend.to_host(t.data)
