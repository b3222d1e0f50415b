"""A flat runner's block as NumPy's inner loops called from C (kernels/cpu/_ufunc_loops.c): at a few
thousand elements a ufunc call is mostly NumPy's dispatch (about 0.25 us on the 2-core machine),
which the loop it ends in is not. A plan of ufunc and relu steps whose ufuncs resolve exactly to
one of their own loops (no cast) runs as those loops over the operands' data: the same functions on
the same memory with the same strides as the block function's calls, so the same bits.

Design: docs/design/tiers.md, section "Flat runners".
"""
from __future__ import annotations

import numpy as np

try:
    from lazytensor.kernels.cpu import _ufunc_loops
except ImportError:                 # (not compiled: the block functions serve every call)
    _ufunc_loops = None

# The ufuncs whose NumPy loops for exact types are their legacy inner loops, called as they are
# (no cast, no error of their own beyond the floating-point flags, which the tier ignores).
LOOP_UFUNCS = frozenset((
    np.add, np.subtract, np.multiply, np.divide, np.maximum, np.minimum, np.negative, np.absolute,
    np.square, np.sqrt, np.fabs, np.copysign, np.floor, np.ceil, np.trunc, np.rint,
    np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal,
    np.logical_and, np.logical_or, np.logical_xor, np.logical_not,
    np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert,
    np.isnan, np.isinf, np.isfinite, np.signbit,
))


def _layouts_agree() -> bool:
    """Whether the ndarray and ufunc fields _ufunc_loops.c declares are where this NumPy has them:
    each read compared with NumPy's own answer, on arrays of several layouts and on every ufunc
    the plans may call."""
    if _ufunc_loops is None:
        return False
    try:
        _ufunc_loops.setup(np.ndarray, np.ufunc)
        base = np.arange(24, dtype=np.float64).reshape(4, 6)
        for a in (base, base[:, ::2], np.zeros((), np.int8), np.ones(5, np.float32), base.T):
            data, nd, descr, flags = _ufunc_loops.probe_array(a)
            if data != a.__array_interface__["data"][0] or nd != a.ndim or descr is not a.dtype:
                return False
            if bool(flags & 0x1) != a.flags.c_contiguous or bool(flags & 0x100) != a.flags.aligned or \
                    bool(flags & 0x400) != a.flags.writeable:
                return False
        for u in LOOP_UFUNCS:
            if _ufunc_loops.probe_ufunc(u) != (u.nin, u.nout, u.nargs, u.ntypes):
                return False
            *_, name, loops = _ufunc_loops.probe_ufunc(u, True)
            if name != u.__name__ or [tuple(np.dtype(c).num for c in t.replace("->", "")) for t in u.types] != loops:
                return False
    except Exception:           # noqa: BLE001 (anything unexpected: the block functions serve)
        return False
    return True


AVAILABLE = _layouts_agree()


def loop_plan(program, plan, trace, n: int, input_dtypes, scalar_instrs):
    """A _ufunc_loops.Plan for a block plan (interpret_plan.build_plan's, `trace` its values'
    (shape, dtype)) over n elements of flat operands, or None where a step is not a loop call:
    a cast or one of evaluate_block's own computations, a ufunc not in LOOP_UFUNCS or not resolving
    exactly to its operands' dtypes, a value not of n elements, or a result not written straight
    into the destination. `scalar_instrs`: the scalar instructions in the order of the call's
    scalar values."""
    if not AVAILABLE or not plan.direct:
        return None
    n_in = len(input_dtypes)
    scalar_slot = {i: 1 + n_in + k for k, i in enumerate(scalar_instrs)}
    constants: list = []
    steps: list = []
    refs: list = []             # per value: (slot, stride, dtype)
    last = len(plan.steps) - 1

    def constant(a) -> int:
        constants.append(a)
        return 1 + n_in + len(scalar_instrs) + len(constants) - 1

    for i, (kind, fn, args, buf) in enumerate(plan.steps):
        shape, dtype = trace[i]
        dtype = np.dtype(dtype)
        if kind == "load":
            if shape != (n,) or dtype != input_dtypes[args]:
                return None
            refs.append((1 + args, dtype.itemsize, dtype))
            continue
        if kind == "scalar":
            refs.append((scalar_slot[i], 0, dtype))
            continue
        if kind not in ("ufunc", "relu") or shape != (n,):
            return None
        arg_refs = [refs[a] for a in args]
        if kind == "relu":
            ufunc = np.maximum
            zero = fn
            if isinstance(zero, np.ndarray):
                if zero.shape != (n,) or not zero.flags.c_contiguous:
                    return None
                arg_refs.append((constant(zero), zero.dtype.itemsize, zero.dtype))
            else:
                zero = np.asarray(zero)
                arg_refs.append((constant(zero), 0, zero.dtype))
        else:
            ufunc = fn
        if ufunc not in LOOP_UFUNCS or ufunc.nout != 1 or len(arg_refs) != ufunc.nin:
            return None
        if i == last:
            out_ref = (0, dtype.itemsize, dtype)
        else:
            if buf is None or buf.shape != (n,) or buf.dtype != dtype or not buf.flags.c_contiguous:
                return None
            out_ref = (constant(buf), dtype.itemsize, dtype)
        in_dtypes = tuple(r[2] for r in arg_refs)
        try:
            resolved = ufunc.resolve_dtypes(in_dtypes + (None,))
        except (TypeError, ValueError):
            return None
        if resolved != in_dtypes + (dtype,):
            return None
        every = arg_refs + [out_ref]
        steps.append((ufunc, tuple(r[2].num for r in every), tuple(r[0] for r in every),
                      tuple(r[1] for r in every)))
        refs.append(out_ref)
    if not steps:
        return None
    descrs = (np.dtype(program.out_dtype), *input_dtypes, *(np.dtype(trace[i][1]) for i in scalar_instrs))
    if descrs[0] != trace[last][1]:
        return None
    try:
        return _ufunc_loops.Plan(n, descrs, n_in, len(scalar_instrs), constants, steps)
    except (LookupError, TypeError, ValueError):
        return None
