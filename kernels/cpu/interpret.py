"""The interpreter tier: an ElementwiseProgram run with NumPy's own ufuncs, one array operation per
instruction over blocks of the destination, while the program's compiled kernel is built in the
background.

It computes what the compiled kernel computes: each instruction in its dtype, float16 and bfloat16
values rounded after every op (NumPy's float16 loops and ml_dtypes' bfloat16 loops compute in float32
and round, as the kernels do), integers
wrapping, and lazytensor's own meaning where it differs from NumPy's (ops below: integer powers with
a negative exponent, relu of -0.0, division by zero). Integer and exactly rounded ops give the same
bits as the kernel; transcendental functions may differ by an ulp (NumPy's loops are not numba's).
Temporaries are blocks, each freed after its last use, so memory stays near the kernel's
(reductions: kernels/cpu/interpret_reduce.py).
"""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.cpu.interpret_plan import PlanCache, build_plan, real_part_for
from lazytensor.kernels.ops import BFLOAT16, OPS, is_float
from lazytensor.kernels.program import ElementwiseProgram


def _relu(x):
    """+0.0 for -0.0 and for negatives; NaN stays, bit for bit (the kernels' snippet: x > 0 or x != x
    ? x : 0). In branch-free passes: np.where over a condition that flips at random costs 3 ns an
    element in mispredicted branches, np.maximum's vector loop a tenth of that; adding +0 turns its
    -0.0 into +0.0, and NaNs, which it may not keep bit for bit, are copied from x."""
    zero = x.dtype.type(0)
    r = np.asarray(np.maximum(x, zero))     # (a 0-d operand gives a NumPy scalar: written below)
    if is_float(r.dtype):
        np.add(r, zero, out=r)
        nan = x != x
        if nan.any():
            np.copyto(r, x, where=nan)
    return r


def _power(a, b):
    """Integer powers as the kernels compute them: a negative exponent gives the truncated result
    (1 for base 1, +-1 for base -1, 0 otherwise) instead of NumPy's error; complex64 powers in complex128."""
    if a.dtype == np.complex64:     # in complex128, rounded once, as the kernels (float32 cpowf loses digits)
        return np.power(a.astype(np.complex128), b.astype(np.complex128)).astype(np.complex64)
    if a.dtype.kind not in "iu" or b.dtype.kind != "i" or not (b < 0).any():
        return np.power(a, b)
    negative = b < 0
    safe = np.power(a, np.where(negative, 0, b).astype(b.dtype))
    one = a.dtype.type(1)
    truncated = np.where(a == 1, one, np.where(a == -1, np.where(b & 1, a, one), a.dtype.type(0)))
    return np.where(negative, truncated, safe)


def _reciprocal(x):
    """Integer 1 // x with 1 // 0 = 0, as the kernels define it (NumPy's value depends on the width)."""
    if x.dtype.kind not in "iu":
        return np.reciprocal(x)
    zero = x == 0
    return np.where(zero, x.dtype.type(0), np.reciprocal(np.where(zero, x.dtype.type(1), x)))


def _sigmoid(x):
    """float16 and bfloat16 as the kernels compute them: in float32, rounded once (NumPy's float16 loops
    and the op table's reference would round e^-x, 1 + e^-x and the quotient each)."""
    if x.dtype != np.float16 and x.dtype != BFLOAT16:
        return OPS["sigmoid"].reference(x)
    one = np.float32(1)
    return (one / (one + np.exp(-x.astype(np.float32)))).astype(x.dtype)


_OWN = {"relu": _relu, "power": _power, "reciprocal": _reciprocal, "sigmoid": _sigmoid}


def _value(op: str, args):
    own = _OWN.get(op)
    return own(*args) if own is not None else OPS[op].reference(*args)


# Elements one block of an interpreted call computes at once: the temporaries of a long program
# stay a few cache-sized arrays (a 16-op chain on 2^25 float32 held 2.9 GiB of whole-array
# temporaries), and a broadcast operand is read as the view it is, never copied to full size.
BLOCK = 1 << 16

_dying: dict = {}       # program -> for each instruction, the value ids whose last use it is


def _dies_after(program: ElementwiseProgram) -> tuple:
    dies = _dying.get(program)
    if dies is None:
        keep = {vid for vid, _ in program.stores()} | {program.result}
        last = {}
        for i, (op, _dtype, *args) in enumerate(program.instrs):
            if op not in ("load", "scalar"):        # (their arguments index the inputs and scalars)
                for a in args:
                    last[a] = i
        per = [[] for _ in program.instrs]
        for vid, i in last.items():
            if vid not in keep:
                per[i].append(vid)
        dies = _dying.setdefault(program, tuple(tuple(p) for p in per))
    return dies


def _generic(program: ElementwiseProgram, i: int, values):
    """Instruction i (an op) computed from `values` as evaluate_block does."""
    op, dtype, *args = program.instrs[i]
    value = np.asarray(_value(op, [values[a] for a in args]))
    return value if value.dtype == dtype else value.astype(dtype)


def evaluate_block(program: ElementwiseProgram, inputs, scalars, scalar_values=None, trace=None) -> list:
    """The program's values over `inputs` (NumPy arrays or views that broadcast together), each
    intermediate dropped after its last use: the list holds only the stored values (and the
    result) at the end. `scalar_values`: the scalars converted once, for a call of many blocks.
    `trace`: a list that receives each value's (shape, dtype) as computed."""
    values = []
    dies = _dies_after(program)
    for i, (op, dtype, *args) in enumerate(program.instrs):
        dtype = np.dtype(dtype)
        if op == "load":
            value = np.asarray(inputs[args[0]])
        elif op == "scalar":
            value = scalar_values[i] if scalar_values is not None else np.asarray(scalars[args[0]]).astype(dtype)
        elif op == "astype":
            value = real_part_for(values[args[0]], dtype).astype(dtype)
        else:
            value = np.asarray(_value(op, [values[a] for a in args]))
            natural = value.dtype
            if value.dtype != dtype:
                value = value.astype(dtype)
        if trace is not None:
            trace.append((value.shape, natural if op not in ("load", "scalar", "astype") else value.dtype))
        values.append(value)
        for vid in dies[i]:
            values[vid] = None
    return values


_scalar_slots: dict = {}     # program -> ((instruction, scalar index, dtype), ...)


def converted_scalars(program: ElementwiseProgram, scalars) -> dict:
    slots = _scalar_slots.get(program)
    if slots is None:
        slots = _scalar_slots.setdefault(program, tuple(
            (i, args[0], np.dtype(dtype)) for i, (op, dtype, *args) in enumerate(program.instrs) if op == "scalar"))
    return {i: np.asarray(scalars[k]).astype(dtype) for i, k, dtype in slots}


def blocks(shape: tuple, block: int = BLOCK):
    """Indexes into an array of `shape` cutting it into pieces of about `block` elements, in C
    order: integers for the leading dimensions, then a slice of one dimension."""
    size = 1
    for d in shape:
        size *= d
    if size <= block or not shape:
        yield ()
        return
    k, inner = len(shape) - 1, 1
    while k > 0 and inner * shape[k] <= block:
        inner *= shape[k]
        k -= 1
    rows = max(1, block // inner)
    for lead in np.ndindex(*shape[:k]):
        for r in range(0, shape[k], rows):
            yield lead + (slice(r, r + rows),)


def operand_block(a: np.ndarray, shape: tuple, index: tuple):
    """The part of `a` (broadcasting to `shape`) that the block `index` of `shape` reads."""
    if not index or a.ndim == 0:
        return a
    off = len(shape) - a.ndim
    sub = []
    for d, i in enumerate(index):
        if d < off:
            continue
        if a.shape[d - off] == shape[d]:
            sub.append(i)
        else:                       # a broadcast dimension (size 1)
            sub.append(0 if isinstance(i, int) else slice(None))
    return a[tuple(sub)]


_plans = PlanCache()


def _planned(program, operands, scalars, scalar_values, target, direct):
    """evaluate_block's values through the kept plan for this block's structure (built from a
    first evaluate_block); None where the plan wrote the stored value into `target`."""
    key = (program, target.shape, direct, tuple((a.shape, a.dtype) for a in operands))
    plan = _plans.take(key)
    if plan is None:
        trace = []
        values = evaluate_block(program, operands, scalars, scalar_values, trace)
        _plans.give(key, build_plan(program, trace, _dies_after(program), direct, lambda i, vals: _generic(program, i, vals)))
        return values
    try:
        values = plan.run(program, operands, scalar_values, _dies_after(program), target)
    finally:
        _plans.give(key, plan)
    return None if plan.direct else values


def run_program(program: ElementwiseProgram, out: np.ndarray, inputs, scalars, mask=None) -> None:
    """out[...] = the program over `inputs` (broadcast to out's shape) and `scalars`; with several
    outputs, the arrays after the program's inputs receive the others (out1, out2, ...), as the
    kernels' launchers pass them. With `mask`, also the packed ReLU mask (result > 0, 8 elements a
    byte, low bit first, C order). Computed block by block (`blocks`)."""
    shape = out.shape
    targets = [out, *inputs[program.n_inputs:]]
    operands = inputs[:program.n_inputs]
    stores = program.stores()
    bits = None if mask is None else np.empty(shape, bool)
    # A stored load is a view of its input: with several outputs, a store before it may write that
    # input (y, x = x, y), so it is copied first, as the kernel reads each element before storing.
    copied = {vid for vid, _ in stores if program.instrs[vid][0] == "load"} if len(stores) > 1 else ()
    # The only store, the last value in the destination's dtype: the plan writes it straight there.
    direct = bits is None and len(stores) == 1 and stores[0][0] == len(program.instrs) - 1 \
        and np.dtype(stores[0][1]) == out.dtype
    with np.errstate(all="ignore"):
        scalar_values = converted_scalars(program, scalars)
        for index in blocks(shape):
            block_operands = [operand_block(a, shape, index) for a in operands]
            target = out if not index else out[index]
            values = _planned(program, block_operands, scalars, scalar_values, target, direct)
            if values is None:
                continue                # (written into the destination by the plan)
            for vid in copied:
                values[vid] = values[vid].copy()
            for target, (vid, _) in zip(targets, stores):
                target[index] = values[vid]
            if bits is not None:
                bits[index] = values[program.result] > 0
    if bits is not None:
        mask[...] = np.packbits(bits.reshape(-1), bitorder="little")
