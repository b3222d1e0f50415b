"""Evaluation happens here and only here: on assignment, or when a value is asked for."""
from __future__ import annotations

import numpy as np

from lazytensor.core import dtypes as _dt
from lazytensor.core.expr import RESULTS, Const, Expr
from lazytensor.core.readers import memory_of
from lazytensor.core.operand import Operand
from lazytensor.core.memory import address as _address
from lazytensor.assign import direct
from lazytensor.assign.host_scalar import reduced_scalar
from lazytensor.assign.plans import planned
from lazytensor.assign.writes import after_write, before_write, readers_of
from lazytensor.core.shapes import check_assignable
from lazytensor.core.tensor import Tensor, asarray, empty
from lazytensor.kernels.backend import backend_for, live_backends
from lazytensor.kernels.cuda.device_memory import as_out_of_memory, is_out_of_memory
from lazytensor.reuse.replay import release_all
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


def assign(dest: Tensor, value, what: str = "assign", private=(), held=True) -> None:
    """dest[...] = value, as one fused kernel when value is elementwise. Every write to a tensor
    comes here, and goes through lazytensor.assign.writes.before_write first (private: nodes of
    value's that only the caller holds, see before_write; held=False: the caller built value and
    drops it, so it need not keep dest as its result). The memory's write count goes up after. Out
    of GPU memory before anything the caller holds was written, the memory lazytensor keeps on the
    device is freed and the steps tried once more; then a DeviceOutOfMemory says what was being
    allocated (retry_out_of_memory)."""
    readers = dest.memory
    if readers is None:
        readers = memory_of(dest)
    if (type(value) is Expr and not readers and value.last_plan is None and value.result is None
            and not value.heavy and value.epoch == RESULTS[0] and value.shape == dest.shape
            and value.dtype == dest.dtype and value.device == dest.device
            and (dest.device == "cuda" or getattr(dest.data.flags, "writeable", True))):
        # _assign's and _write's common case, inline (`y[...] = e` built per call, on small arrays
        # the calls around the kernel are most of its time): nothing reads dest's memory, and e is
        # settled, never planned, elementwise and of dest's shape, dtype and device. (A CuPy array
        # is never read-only, and CuPy builds its flags object on each access.)
        if direct.assign(value, dest) is not None:
            readers.version += 1
            return
    _assign(dest, value, what, private, held, readers)
    readers.version += 1


def _assign(dest, value, what, private, held, readers) -> None:
    if type(value) is Expr:
        if value.result is not None:
            value = value.result                # evaluated: its value is that tensor
        else:
            # Only where live expressions read dest's memory is there anything to do before the write.
            reads = None
            if readers:
                reads, nodes = readers_of((dest,), (value,), private)
                if nodes:
                    # They keep their values; computed in the same plan as the write (several
                    # results, read before any is written), they share its kernel where they can.
                    _write_with_readers(dest, value, nodes)
                    if held and reads[0]:
                        after_write((dest,), (value,), reads)
                    return
                del nodes
            if value.epoch != RESULTS[0]:
                value.settle()
            memo = value.last_plan
            if memo is not None and memo[0] is dest.data:
                # The same expression into the same memory again: its plan still holds (its
                # tensors were not written, or it would have been settled), so only the kernel runs.
                try:
                    run_steps(memo[1], dest.data)
                except Exception as e:
                    _raise_unless_retryable(e)
                    _once_more(lambda: run_steps(memo[1], dest.data))
            else:
                _write(dest, value, what)
            if held and reads is not None and reads[0]:
                after_write((dest,), (value,), reads)
            return
    node = _as_expression(value, dest)
    if type(node) is Tensor and _same_memory(node.data, dest.data):
        _check(node, dest, what)
        return                      # `y[k] += e` writes y[k] back onto itself: nothing to do
    if readers:
        before_write((dest,), (node,))
    _write(dest, node, what)


def _write_with_readers(dest: Tensor, value, nodes) -> None:
    """dest[...] = value, and each live node that reads dest's memory keeps its value in memory of
    its own, all as one simultaneous assignment (lazytensor.assign.simultaneous)."""
    from lazytensor.assign.simultaneous import run_pairs, settled
    own = [empty(n.shape, n.dtype, n.device) for n in nodes]
    run_pairs([(t, settled(n)) for t, n in zip(own, nodes)] + [(dest, settled(value))])
    for t, n in zip(own, nodes):
        n.keep_result(t)


def check_write(node, dest, what: str = "assign") -> None:
    """The errors a write of `node` into `dest` (a tensor, or an expression's memory) raises."""
    _check(node, dest, what)


def _check(node, dest: Tensor, what: str) -> None:
    if node.device is not None and node.device != dest.device:
        raise ValueError(f"cannot {what} an expression on {node.device!r} to a tensor on {dest.device!r}")
    if node.shape != dest.shape:
        check_assignable(node.shape, dest.shape)
    if node.dtype != dest.dtype:
        _dt.check_cast(node.dtype, dest.dtype, what)


def check_writable(dest: Tensor) -> None:
    """Checked where a write is planned: a plan kept for the next write into the same memory
    (Expr.last_plan) was made for a writable destination."""
    if not getattr(dest.data.flags, "writeable", True):
        raise ValueError("assignment destination is read-only (a read-only NumPy array, or a view such as "
                         "broadcast_to's); assign into a writable tensor, e.g. y = x.copy()")


def _write(dest: Tensor, node, what: str) -> None:
    if not getattr(dest.data.flags, "writeable", True):
        check_writable(dest)            # (raises: inline, the test is one attribute on every write)
    if node.device is not None and node.device != dest.device or node.shape != dest.shape or node.dtype != dest.dtype:
        _check(node, dest, what)
    if type(node) is Expr and not node.heavy:
        ran = direct.assign(node, dest)     # one elementwise step over flat operands, unplanned
        if ran is not None:
            if ran:
                node.last_plan = (dest.data, ran)
            return
    steps = retry_out_of_memory(lambda: _plan_and_run(node, dest))
    if type(node) is Expr and not node.heavy:
        node.last_plan = (dest.data, steps)


def _plan_and_run(node, dest: Tensor) -> list:
    steps = planned(node, dest.data, dest.backend, replay=True)
    run_steps(steps, dest.data)
    return steps


_PLANNING = "while planning (taking the plan's temporaries)"


def retry_out_of_memory(run, where: str = _PLANNING):
    """run(); if it ran out of GPU memory before writing anything the caller holds, run() once more
    after freeing what lazytensor keeps on the device, and if that fails too, a DeviceOutOfMemory
    saying what was being allocated. where: what was being done, for an error no step raised."""
    try:
        return run()
    except Exception as e:
        _raise_unless_retryable(e, where)
    return _once_more(run, where)


def _raise_unless_retryable(e, where: str = _PLANNING) -> None:
    """Raise `e` (as a DeviceOutOfMemory where it is one) unless a retry may follow it."""
    if not is_out_of_memory(e):
        raise e
    error = _planning_error(e, where)
    if not error.untouched:
        _reraise(error, e)


def _once_more(run, where: str = _PLANNING):
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
        backend.free_cached_memory()


def _same_memory(a, b) -> bool:
    if a is b:
        return True
    return (a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
            and type(a) is type(b) and _address(a) == _address(b))


def evaluate(expr, *more):
    """A new Tensor holding the value of `expr`: always new memory, as NumPy's np.array(x) (a
    Tensor is copied). An expression keeps the Tensor as its result the first time (a later
    write to it first gives the expression a copy); later calls return copies. With several
    expressions, a tuple of new Tensors, evaluated together (lazytensor.assign.simultaneous)."""
    if more:
        from lazytensor.assign.simultaneous import evaluate_all
        return evaluate_all((expr, *more))
    if not isinstance(expr, Operand):
        return asarray(expr)
    if type(expr) is Expr and expr.result is None:
        dest = retry_out_of_memory(lambda: _new_result(expr), "for the result")
        assign(dest, expr)
        expr.keep_result(dest)
        return dest
    source = expr.result if type(expr) is Expr else expr
    dest = empty(source.shape, source.dtype, source.device)
    assign(dest, source)
    return dest


def _new_result(expr) -> Tensor:
    """Memory for an expression's value (its dtype was checked when it was built)."""
    device = expr.device
    if device is None:
        return empty(expr.shape, expr.dtype, device)
    return Tensor(backend_for(device).empty(expr.shape, expr.dtype), device)


def result_of(x) -> Tensor:
    """The Tensor holding x's value without a copy: x itself, or its result (evaluating it once)."""
    if isinstance(x, Tensor):
        return x
    if type(x) is Expr:
        if x.result is None:
            evaluate(x)
        return x.result
    return evaluate(x)


def to_numpy(x) -> np.ndarray:
    """A host copy of x's values, in memory of its own."""
    t = result_of(x)
    host = t.backend.to_host(t.data)
    return np.array(host, copy=True) if t.device == "cpu" else host


def item(x):
    """The one value of x (of size 1) as a Python scalar: x.item(), float(x), int(x), bool(x)."""
    if type(x) is Expr and x.op == "reduce" and x.result is None:
        value = reduced_scalar(x)
        if value is not None:
            return value
    return to_numpy_shared(x).reshape(()).item()


def to_numpy_shared(x) -> np.ndarray:
    """x's values on the host without a copy where they are already there (CPU): NumPy's
    np.asarray(x) (__array__ with copy=None)."""
    t = result_of(x)
    return t.backend.to_host(t.data)
