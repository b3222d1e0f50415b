"""lt.assign([(dst, e), ...]) and lt.evaluate(e1, e2, ...): several results, read before any is written.

The plan is lazytensor.plan.several's, kept as a recipe (lazytensor.reuse.several_recipes); this
module checks what users pass and runs it. Every write of several results goes through `_write`,
the one place a "before a tensor is written" hook belongs.
"""
from __future__ import annotations

from lazytensor.core import dtypes as _dt
from lazytensor.core.operand import Operand
from lazytensor.core.shapes import check_assignable
from lazytensor.core.tensor import Tensor, asarray, empty
from lazytensor.kernels.cuda.device_memory import DeviceOutOfMemory
from lazytensor.assign.evaluate import _as_expression, assign as _assign_one, check_writable, retry_out_of_memory
from lazytensor.plan.steps import run_steps
from lazytensor.core.expr import RESULTS, Expr
from lazytensor.core.origins import origins_of
from lazytensor.assign import reader_memory
from lazytensor.core.readers import memory_of
from lazytensor.reuse.several_recipes import planned_several
from lazytensor.assign.writes import after_write, readers_of


def checked_pairs(pairs, what: str = "assign") -> list:
    """[(destination Tensor, expression node)] from what a user passed, each pair checked as
    `dst[...] = e` checks it (device, shape, casting), with the pair's position in the error."""
    if isinstance(pairs, (Operand, str, bytes)) or not hasattr(pairs, "__iter__"):
        raise TypeError(f"lt.{what} takes a list of (destination, expression) pairs, "
                        f"got {type(pairs).__name__}")
    result = []
    for k, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise TypeError(f"lt.{what}: item {k} is not a (destination, expression) pair: {pair!r:.80}")
        dest, value = pair
        if not isinstance(dest, Tensor):
            raise TypeError(f"lt.{what}: the destination of pair {k} is a {type(dest).__name__}, not a Tensor; "
                            f"make one with lt.empty(...) or use lt.evaluate(e1, e2, ...) for new tensors")
        node = _as_expression(value, dest)
        if node.device is not None and node.device != dest.device:
            raise ValueError(f"lt.{what}: pair {k}: cannot assign an expression on {node.device!r} "
                             f"to a tensor on {dest.device!r}")
        try:
            if node.shape != dest.shape:
                check_assignable(node.shape, dest.shape)
            if node.dtype != dest.dtype:
                _dt.check_cast(node.dtype, dest.dtype, "assign")
        except (ValueError, TypeError) as e:
            raise type(e)(f"lt.{what}: pair {k}: {e}") from None
        result.append((dest, node))
    return result


def assign(pairs) -> None:
    """Writes each expression into its destination, as if all were read first and written after:
    `lt.assign([(a, b), (b, a)])` swaps a and b. Expressions whose destinations have one shape run as
    one kernel with several outputs; a value they share is computed once."""
    pairs = checked_pairs(pairs)
    if len(pairs) == 1:
        _assign_one(*pairs[0])
        return
    _write(pairs)


def evaluate_all(exprs) -> tuple:
    """New Tensors holding the values of `exprs`, evaluated together (a Tensor is copied, as
    lt.evaluate(t) copies it)."""
    results, pairs = [], []
    for e in exprs:
        if not isinstance(e, Operand):
            results.append(asarray(e))
        else:
            dest = empty(e.shape, e.dtype, e.device)
            results.append(dest)
            pairs.append((dest, e))
    if len(pairs) == 1:
        _assign_one(*pairs[0])
    elif pairs:
        _write(pairs)
    keeping = [(dest, e) for dest, e in pairs if type(e) is Expr and e.result is None]
    for (dest, e), origin in zip(keeping, origins_of([e for _, e in keeping])):
        e.keep_result(dest, origin)  # an evaluated expression keeps its value, as with lt.evaluate(e)
    return tuple(results)


def _write(pairs) -> None:
    """Runs the plan of several checked (destination, node) pairs: the one function through which
    several results are written. Expressions built earlier that read a destination keep their
    values (lazytensor.assign.writes): they are evaluated in the same plan, before anything is written."""
    dests = [d for d, _ in pairs]
    values = [n for _, n in pairs]
    reads, readers = readers_of(dests, values)
    # The live expressions that read a destination keep their values: computed in the same plan as
    # the writes (one more result each, into memory of its own), they share its steps. Settled one
    # by one before it, each would plan and run again what it shares with the values (an optimizer
    # step's gradients, held by the caller, would each rerun the forward and backward).
    own = reader_memory.memory_for(readers)
    kept = [v for v, r in zip(values, reads) if r and type(v) is Expr and v.result is None]
    origins = origins_of(readers + kept)    # the write counts they are computed from: before any write
    run_pairs([(t, settled(n)) for t, n in zip(own, readers)] + [(d, settled(n)) for d, n in pairs])
    for t, n, o in zip(own, readers, origins):
        n.keep_result(t, o)
    del readers
    after_write(dests, values, reads, dict(zip(map(id, kept), origins[len(own):])))


def run_pairs(pairs) -> None:
    """Plans and runs checked (destination, node) pairs as one simultaneous assignment, with no
    write hook: the caller has settled the readers of the destinations."""
    by_device: dict = {}
    for dest, node in pairs:
        check_writable(dest)
        by_device.setdefault(dest.device, []).append((dest, node))
    groups = list(by_device.values())
    retry_out_of_memory(lambda: _plan_and_run(groups))     # out of GPU memory: once more after freeing
    for dest, _ in pairs:
        memory_of(dest).version += 1


def _plan_and_run(groups) -> None:
    plans = [planned_several([(d.data, n) for d, n in group], group[0][0].backend) for group in groups]
    for k, (steps, group) in enumerate(zip(plans, groups)):
        # every plan is made (and every error raised) before anything runs
        try:
            run_steps(steps, [d.data for d, _ in group])
        except DeviceOutOfMemory as e:
            e.untouched = e.untouched and not k     # an earlier device's results are written
            raise


def settled(node):
    """The node to plan: an evaluated expression is its result; one whose operands were evaluated
    since it was built reads their results (Expr.settle)."""
    if type(node) is not Expr:
        return node
    if node.result is not None:
        return node.result
    if node.epoch != RESULTS[0]:
        node.settle()
    return node
