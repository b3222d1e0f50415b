"""The interpreter tier's flat runners: a program whose operands are C-contiguous arrays of the
destination's shape, run on their flat 1-d views as one generated Python function of plain ufunc
calls into buffers it keeps (a block of BLOCK elements at a time). A call then costs the ufuncs
and little else: no layout, key or plan lookups, no list of values.

It makes the calls interpret_plan's plan makes (built from the same traced first block), so its
values are the interpreter's bits. Design: docs/design/tiers.md.
"""
from __future__ import annotations

import threading
from operator import is_

import numpy as np

from lazytensor.kernels.cpu import interpret_cloops
from lazytensor.kernels.cpu.interpret import BLOCK, _dies_after, _generic, converted_scalars, evaluate_block
from lazytensor.kernels.cpu.interpret_plan import build_plan, real_part_for

try:        # NumPy's error state set and reset directly: np.errstate costs a microsecond a call
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    _IGNORE = _make_extobj(all="ignore")
except (ImportError, TypeError):            # (another NumPy: errstate)
    _extobj_contextvar = None

# Bytes of buffers all flat runners may hold together; past it they are dropped (and rebuilt).
MAX_BYTES = 64 << 20
MAX_RUNNERS = 1024


def ignoring_errors():
    """A token for restore_errors: NumPy's floating-point errors ignored until then."""
    if _extobj_contextvar is not None:
        return _extobj_contextvar.set(_IGNORE)
    state = np.errstate(all="ignore")
    state.__enter__()
    return state


def restore_errors(token) -> None:
    if _extobj_contextvar is not None:
        _extobj_contextvar.reset(token)
    else:
        token.__exit__(None, None, None)


def _traced_plan(program, n: int, operands, scalar_values):
    """(the plan of a block of n elements, its values' (shape, dtype)), traced on `operands`
    (views of n elements)."""
    # Traced on one element of each operand: a value's dtype does not depend on the count, and a
    # flat value of one element is one of n here (a whole block's trace cost a second call at 2^16
    # elements 0.8-1.6 ms, against NumPy's 0.3 ms for the expression).
    trace = []
    evaluate_block(program, [a[:1] for a in operands], None, scalar_values, trace)
    trace = [((n,) if shape == (1,) else shape, natural) for shape, natural in trace]
    dies = _dies_after(program)
    stores = program.stores()
    direct_ok = np.dtype(stores[0][1]) == np.dtype(program.out_dtype)
    plan = build_plan(program, trace, dies, direct_ok, lambda i, vals: _generic(program, i, vals))
    return plan, trace


def _block_function(program, n: int, operands, scalar_values):
    """(function(out, *operands, *scalar values) computing one block of n elements, bytes of its
    buffers): the plan of a block traced on `operands` (views of n elements), as source code."""
    plan, _ = _traced_plan(program, n, operands, scalar_values)
    names, consts, lines = [], {}, []
    slots = {i: k for k, i in enumerate(sorted(scalar_values))}
    last = len(plan.steps) - 1
    for i, (kind, fn, args, buf) in enumerate(plan.steps):
        into = "out" if i == last and plan.direct else None
        if buf is not None:
            into = f"b{id(buf)}"
            consts[into] = buf
        if kind == "load":
            names.append(f"x{args}")
            continue
        if kind == "scalar":
            names.append(f"s{slots[i]}")
            continue
        if kind in ("ufunc", "relu"):
            consts[f"f{i}"] = fn
            call = f"f{i}({', '.join(names[a] for a in args)}, out={into})" if kind == "ufunc" else \
                f"maximum({names[args[0]]}, f{i}, out={into})"
            lines.append(call)
        elif kind == "cast":
            lines.append(f"copyto({into}, real_part_for({names[args[0]]}, {into}.dtype), casting='unsafe')")
        else:       # evaluate_block's own computation of instruction i, from its arguments' values
            into = f"v{i}"
            consts[f"g{i}"] = _argument_generic(program, i)
            op_args = program.instrs[i][2:]
            lines.append(f"{into} = g{i}(({''.join(names[a] + ', ' for a in op_args)}))")
        names.append(into)
    result = names[-1]
    if not (plan.direct and result == "out"):
        lines.append(f"out[...] = {result}")
    xs = "".join(f", x{k}" for k in range(program.n_inputs))
    ss = "".join(f", s{k}" for k in range(len(slots)))
    source = f"def block(out{xs}{ss}):\n    " + "\n    ".join(lines) + "\n"
    scope = {"maximum": np.maximum, "copyto": np.copyto, "real_part_for": real_part_for, **consts}
    exec(compile(source, f"<lazytensor flat runner {n}>", "exec"), scope)   # noqa: S102
    return scope["block"], plan.nbytes


def _argument_generic(program, i: int):
    """Instruction i computed as evaluate_block does, from a tuple of its arguments' values."""
    args = program.instrs[i][2:]

    def value(arg_values):
        values = {a: v for a, v in zip(args, arg_values)}
        return _generic(program, i, values)
    return value


class FlatRunner:
    """The program over n elements of flat operands: full blocks, then the tail, each a generated
    block function (_block_function) with buffers of its own. A call that finds the runner busy
    (another thread) returns False: its buffers are not shared."""

    __slots__ = ("program", "n", "dtypes", "full", "tail", "loops", "nbytes", "busy", "_scalars", "_values")

    def __init__(self, program, n: int):
        self.program, self.n = program, n
        self.dtypes = tuple(np.dtype(d) for d in program.input_dtypes())
        self.full = self.tail = None
        self.loops = False          # the block as NumPy's inner loops (interpret_cloops); None: none
        self.nbytes = 0
        self.busy = threading.Lock()
        self._scalars, self._values = None, None

    def _scalar_values(self, scalars) -> tuple:
        """The scalars converted to their instructions' dtypes, kept while the same objects come
        (a literal in the caller's code is one object; equal values may differ in bits: -0.0, 0.0)."""
        last = self._scalars
        if last is not None and len(last) == len(scalars) and all(map(is_, last, scalars)):
            return self._values
        converted = converted_scalars(self.program, scalars)
        self._scalars, self._values = tuple(scalars), (converted, tuple(converted[i] for i in sorted(converted)))
        return self._values

    def run(self, out: np.ndarray, inputs, scalars) -> bool:
        """out[...] = the program; False, with nothing done, where the runner is busy or an
        operand is not of the program's dtype. (Written for the microseconds of a small call:
        dtypes compared by identity first, the scalars' check and NumPy's error state inline.)"""
        loops = self.loops
        if loops:
            # NumPy's loops called from C, holding the GIL throughout: no other call of this
            # runner runs meanwhile (the block functions' buffers are others). It checks the
            # arrays' types, dtypes (by identity), sizes and layouts, and refuses the call else.
            last = self._scalars
            if last is not None and len(last) == len(scalars) and \
                    (not last or (last[0] is scalars[0] if len(last) == 1 else all(map(is_, last, scalars)))):
                values = self._values[1]
            else:
                values = self._scalar_values(scalars)[1]
            if loops(out, inputs, values):
                return True
        k = 0
        dtypes = self.dtypes
        for a in inputs:
            dt = a.dtype
            if dt is not dtypes[k] and dt != dtypes[k]:
                return False
            k += 1
        if not self.busy.acquire(False):
            return False
        try:
            last = self._scalars
            if last is not None and len(last) == len(scalars) and \
                    (not last or (last[0] is scalars[0] if len(last) == 1 else all(map(is_, last, scalars)))):
                by_slot, values = self._values
            else:
                by_slot, values = self._scalar_values(scalars)
            if out.ndim != 1:
                out, inputs = out.reshape(-1), [a.reshape(-1) for a in inputs]
            token = _extobj_contextvar.set(_IGNORE) if _extobj_contextvar is not None else ignoring_errors()
            try:
                if self.n <= BLOCK:
                    tail = self.tail
                    if loops is False:
                        loops = self.loops = self._loop_plan(inputs, by_slot)
                        if loops and loops(out, inputs, values):
                            return True
                    if tail is None:
                        tail = self.tail = self._build(self.n, inputs, by_slot)
                    tail[0](out, *inputs, *values)
                else:
                    self._run_blocks(out, inputs, by_slot, values)
            finally:
                restore_errors(token)
        finally:
            self.busy.release()
        return True

    def _run_blocks(self, dest, flat, by_slot, values) -> None:
        n = self.n
        full_blocks = n // BLOCK
        if self.full is None:
            self.full = self._build(BLOCK, [a[:BLOCK] for a in flat], by_slot)
        block = self.full[0]
        for start in range(0, full_blocks * BLOCK, BLOCK):
            stop = start + BLOCK
            block(dest[start:stop], *[a[start:stop] for a in flat], *values)
        start = full_blocks * BLOCK
        if start < n:
            if self.tail is None:
                self.tail = self._build(n - start, [a[start:] for a in flat], by_slot)
            self.tail[0](dest[start:], *[a[start:] for a in flat], *values)

    def _loop_plan(self, operands, scalar_values):
        """The block of all n elements as NumPy's inner loops (a plan with buffers of its own), or
        None where interpret_cloops cannot make one."""
        if not interpret_cloops.AVAILABLE:
            return None
        plan, trace = _traced_plan(self.program, self.n, operands, scalar_values)
        loops = interpret_cloops.loop_plan(self.program, plan, trace, self.n, self.dtypes, sorted(scalar_values))
        if loops is not None:
            self.nbytes += plan.nbytes
        return loops

    def _build(self, n, operands, scalar_values):
        fn, nbytes = _block_function(self.program, n, operands, scalar_values)
        self.nbytes += nbytes
        return fn, nbytes


class FlatRunners:
    """Runners by (program, shape); all together hold at most MAX_BYTES of buffers, and there are
    at most MAX_RUNNERS (past either, they are dropped and rebuilt as calls come)."""

    def __init__(self):
        self._runners: dict = {}
        self.drops = 0          # times all were dropped: a holder of runners drops its own then

    def get(self, program, shape):
        return self._runners.get((program, shape))

    def make(self, program, shape) -> FlatRunner:
        n = 1
        for d in shape:
            n *= d
        runner = FlatRunner(program, n)
        if len(self._runners) >= MAX_RUNNERS or sum(r.nbytes for r in self._runners.values()) > MAX_BYTES:
            self._runners = {}
            self.drops += 1
        self._runners[(program, shape)] = runner
        return runner
