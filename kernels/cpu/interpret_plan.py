"""The interpreter tier's kept plans: per program, block shape and operand types, the NumPy calls
of one block (evaluate_block's), each plain ufunc writing into a buffer kept with the plan and
reused by later values, the stored value written straight into the destination. Each later call
of that structure then makes those calls only: no temporaries allocated, no copy of the result.

Design: docs/design/tiers.md.
"""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.ops import OPS

# Bytes of buffers all kept plans may hold together; past it they are dropped (and rebuilt).
MAX_BYTES = 64 << 20


def _maximum_is_relu(dtype, zeros: bool) -> bool:
    """Whether this NumPy's maximum(x, +0) is the kernels' relu for `dtype`: +0.0 for -0.0 and for
    negatives, each NaN kept bit for bit (quiet, signalling, with payloads), on the vector loop's
    body and tail. Then relu is one pass instead of four. `zeros`: with +0 as an array of x's shape
    (the loop over two contiguous operands, not the one over a broadcast scalar)."""
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        return False
    uint = np.dtype(f"u{dtype.itemsize}")
    nans = [0x7FA00001, 0xFFC12345, 0x7FC00000] if dtype.itemsize == 4 else \
        [0x7FF4000000000001, 0xFFF8000000000123, 0x7FF8000000000000]
    for n in (1, 3, 7, 17, 64, 1031):
        x = np.resize(np.array(nans, uint).view(dtype), n).copy()
        x[1::4] = -0.0
        x[2::5] = -1.5
        x[3::7] = 2.5
        r = np.maximum(x, np.zeros(n, dtype) if zeros else dtype.type(0))
        want = np.where((x > 0) | (x != x), x, dtype.type(0))
        if not np.array_equal(r.view(uint), want.view(uint)):
            return False
    return True


_RELU_BY_MAXIMUM = {dt: _maximum_is_relu(dt, False) for dt in (np.float32, np.float64)}
# maximum against a block of zeros: this NumPy's loop over a broadcast scalar is not vectorized
# (2^16 float32: 38 us against 10 us for two contiguous operands on the 2-core machine).
_RELU_BY_ZEROS = {dt: _maximum_is_relu(dt, True) for dt in (np.float32, np.float64)}
_ZEROS: dict = {}           # dtype -> read-only +0.0 of BLOCK elements, viewed by relu steps
ZEROS_ELEMENTS = 1 << 16


def relu_zero(shape, dtype):
    """The second operand of a relu step's maximum over values of `shape`: read-only zeros of that
    shape where the contiguous loop is the kernels' relu and they fit in ZEROS_ELEMENTS, else +0."""
    dtype = np.dtype(dtype)
    n = 1
    for d in shape:
        n *= d
    if not _RELU_BY_ZEROS.get(dtype.type, False) or n > ZEROS_ELEMENTS:
        return dtype.type(0)
    zeros = _ZEROS.get(dtype)
    if zeros is None:
        zeros = np.zeros(ZEROS_ELEMENTS, dtype)
        zeros.flags.writeable = False
        zeros = _ZEROS.setdefault(dtype, zeros)
    return zeros[:n].reshape(shape)


def _ufunc(op: str, dtype):
    """The ufunc that computes `op` exactly as evaluate_block does, or None."""
    if op == "relu":
        return np.maximum if _RELU_BY_MAXIMUM.get(dtype.type, False) else None
    ref = OPS[op].reference if op in OPS else None
    if op in ("power", "reciprocal", "sigmoid") or not isinstance(ref, np.ufunc) or ref.nout != 1 \
            or ref.nin != OPS[op].arity:
        return None
    return ref


class Plan:
    """One block's steps: (kind, function, argument value ids, buffer), kind "ufunc" (fn(*args,
    out=buffer)), "cast" (copyto), or "value" (evaluate_block's own computation)."""

    __slots__ = ("steps", "nbytes", "direct")

    def __init__(self, steps, nbytes, direct):
        self.steps, self.nbytes, self.direct = steps, nbytes, direct

    def run(self, program, operands, scalar_values, dies, target):
        """The values of the block (as evaluate_block's list); with `direct` the last one is
        written into `target` (the destination's block) and not returned."""
        values = []
        last = len(self.steps) - 1
        for i, (kind, fn, args, buf) in enumerate(self.steps):
            if kind == "load":
                value = operands[args]
            elif kind == "scalar":
                value = scalar_values[i]
            elif kind == "ufunc":
                out = target if i == last and self.direct else buf
                if len(args) == 2:
                    fn(values[args[0]], values[args[1]], out=out)
                else:
                    fn(*[values[a] for a in args], out=out)
                value = out
            elif kind == "relu":            # maximum(x, +0): _maximum_is_relu, relu_zero
                out = target if i == last and self.direct else buf
                np.maximum(values[args[0]], fn, out=out)
                value = out
            elif kind == "cast":
                np.copyto(buf, real_part_for(values[args[0]], buf.dtype), casting="unsafe")
                value = buf
            else:
                value = fn(i, values)
            values.append(value)
            for vid in dies[i]:
                values[vid] = None
        return values


def build_plan(program, traced, dies, direct_ok: bool, generic) -> Plan:
    """A plan from one block's values as evaluate_block computed them (`traced`: their shapes and
    dtypes). `dies`: per instruction, the values whose last use it is (their buffers serve later
    values). `generic(i, values)` computes instruction i as evaluate_block does. `direct_ok`: the
    last value may be written into the destination (it is the only store and has its dtype)."""
    steps, nbytes, pool = [], 0, {}
    last = len(program.instrs) - 1
    direct = False
    # A ufunc writes its value into the destination only where NumPy casts it there unasked (a
    # scan's dtype= stores a float value as int64: the block loop's store casts that).
    store = np.dtype(program.stores()[0][1])
    direct_ok = direct_ok and bool(np.can_cast(np.dtype(program.instrs[last][1]), store, "same_kind"))
    # The buffers each value may read: its own, and for a "value" step its arguments' (np.real and
    # np.imag of a complex block are views of it). A buffer serves a later value only once no live
    # value reads it.
    holds: list = []
    readers: dict = {}
    for i, (op, dtype, *args) in enumerate(program.instrs):
        dtype = np.dtype(dtype)
        shape, natural = traced[i]
        fn = None if op in ("load", "scalar", "astype") else _ufunc(op, dtype)
        if op == "load":
            steps.append(("load", None, args[0], None))
        elif op == "scalar":
            steps.append(("scalar", None, (), None))
        elif op == "astype" or (fn is not None and natural == dtype):
            kind = "cast" if op == "astype" else "relu" if op == "relu" else "ufunc"
            buf = None
            if i == last and direct_ok and kind != "cast":
                direct = True
            else:
                free = pool.get((shape, dtype))
                if free:
                    buf = free.pop()
                else:
                    buf = np.empty(shape, dtype)
                    nbytes += buf.nbytes
            steps.append((kind, relu_zero(shape, dtype) if kind == "relu" else fn, tuple(args), buf))
        else:
            steps.append(("value", generic, (), None))
        own = steps[i][3]
        if steps[i][0] == "value":
            held = {id(b): b for a in args if isinstance(a, int) and a < i for b in holds[a]}
        else:
            held = {id(own): own} if own is not None else {}
        holds.append(list(held.values()))
        for b in holds[i]:
            readers[id(b)] = readers.get(id(b), 0) + 1
        for vid in dies[i]:
            for buf in holds[vid]:
                readers[id(buf)] -= 1
                if not readers[id(buf)]:
                    pool.setdefault((buf.shape, buf.dtype), []).append(buf)
            holds[vid] = []
    return Plan(steps, nbytes, direct)


def real_part_for(value, dtype):
    """A complex value's real part where it is cast to a real dtype other than bool (what NumPy's
    cast keeps, without its ComplexWarning: the user's astype already built the node)."""
    if value.dtype.kind == "c" and dtype.kind not in "cb":
        return value.real
    return value


class PlanCache:
    """Plans by key; a plan is taken out while a call runs it (two threads never share buffers)."""

    def __init__(self):
        self._free: dict = {}
        self._bytes = 0

    def take(self, key):
        free = self._free.get(key)
        if not free:
            return None
        plan = free.pop()
        self._bytes -= plan.nbytes
        return plan

    def give(self, key, plan) -> None:
        if plan.nbytes > MAX_BYTES:
            return
        if self._bytes + plan.nbytes > MAX_BYTES:
            self._free, self._bytes = {}, 0
        self._free.setdefault(key, []).append(plan)
        self._bytes += plan.nbytes
