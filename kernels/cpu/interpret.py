"""The interpreter tier: an ElementwiseProgram run with NumPy's own ufuncs, one whole-array operation
per instruction, while the program's compiled kernel is built in the background.

It computes what the compiled kernel computes: each instruction in its dtype, float16 and bfloat16
values rounded after every op (NumPy's float16 loops and ml_dtypes' bfloat16 loops compute in float32
and round, as the kernels do), integers
wrapping, and lazytensor's own meaning where it differs from NumPy's (ops below: integer powers with
a negative exponent, relu of -0.0, division by zero). Integer and exactly rounded ops give the same
bits as the kernel; transcendental functions may differ by an ulp (NumPy's loops are not numba's).
Temporaries are whole arrays, so it costs more memory traffic than a kernel: it serves first calls,
not loops.
"""
from __future__ import annotations

import numpy as np

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
    (1 for base 1, +-1 for base -1, 0 otherwise) instead of NumPy's error."""
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
    """bfloat16 computes in float32 and rounds once, as its kernels do (the op table's reference,
    1 / (1 + exp(-x)) in bfloat16 ops, would round three times)."""
    if x.dtype == BFLOAT16:
        return OPS["sigmoid"].reference(x.astype(np.float32)).astype(BFLOAT16)
    return OPS["sigmoid"].reference(x)


_OWN = {"relu": _relu, "power": _power, "reciprocal": _reciprocal, "sigmoid": _sigmoid}


def _value(op: str, args):
    own = _OWN.get(op)
    return own(*args) if own is not None else OPS[op].reference(*args)


def run_program(program: ElementwiseProgram, out: np.ndarray, inputs, scalars, mask=None) -> None:
    """out[...] = the program over `inputs` (broadcast to out's shape) and `scalars`; with several
    outputs, the arrays after the program's inputs receive the others (out1, out2, ...), as the
    kernels' launchers pass them. With `mask`, also the packed ReLU mask (result > 0, 8 elements a
    byte, low bit first, C order)."""
    values = []
    with np.errstate(all="ignore"):
        for op, dtype, *args in program.instrs:
            dtype = np.dtype(dtype)
            if op == "load":
                value = np.asarray(inputs[args[0]])
            elif op == "scalar":
                value = np.asarray(scalars[args[0]]).astype(dtype)
            elif op == "astype":
                value = values[args[0]].astype(dtype)
            else:
                value = np.asarray(_value(op, [values[a] for a in args]))
                if value.dtype != dtype:
                    value = value.astype(dtype)
            values.append(value)
        targets = [out, *inputs[program.n_inputs:]]
        for target, (vid, _) in zip(targets, program.stores()):
            target[...] = values[vid]
        result = values[program.result]
    if mask is not None:
        bits = np.broadcast_to(result, out.shape).reshape(-1) > 0
        mask[...] = np.packbits(bits, bitorder="little")


def run_reduction(program: ElementwiseProgram, spec, out: np.ndarray, inputs, scalars) -> None:
    """out[...] = the reduction `spec` of the program's values over spec.in_shape, with NumPy's
    reductions in the accumulation dtype: the same results as the kernel for integers, bools,
    max/min and arg-reductions; float sums and moments within rounding (another summation order)."""
    values = np.empty(spec.in_shape, program.out_dtype)
    run_program(program, values, inputs, scalars)
    axes, acc, kind = spec.axes, spec.acc_dtype, spec.kind
    with np.errstate(all="ignore"):
        if kind in ("sum", "prod"):
            result = getattr(np, kind)(values, axis=axes, dtype=acc)
        elif kind in ("max", "min"):
            result = (np.max if kind == "max" else np.min)(values.astype(acc), axis=axes)
        elif kind in ("any", "all"):
            result = getattr(np, kind)(values, axis=axes)
        elif kind in ("argmax", "argmin"):
            (axis,) = axes
            result = getattr(np, kind)(values, axis=axis)
        elif kind == "mean":
            result = np.mean(values, axis=axes, dtype=acc)
        elif kind == "var":
            result = np.var(values, axis=axes, dtype=acc, ddof=spec.ddof)
            if spec.root:
                result = np.sqrt(result)
        elif kind == "meanvar":
            result = np.stack([np.mean(values, axis=axes, dtype=acc),
                               np.var(values, axis=axes, dtype=acc, ddof=spec.ddof)])
        else:
            raise ValueError(f"unknown reduction {kind!r}")
        out[...] = np.asarray(result).astype(spec.out_dtype)
