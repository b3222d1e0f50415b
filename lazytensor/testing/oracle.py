"""The NumPy oracle of an expression DAG: each node built with lazytensor and eagerly with NumPy on
the same operands, with a per-element error bound that `assert_matches` compares against.

Design: docs/design/testing.md, section "lazytensor/testing/oracle.py".
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np

from lazytensor.core.expr import Expr, apply
from lazytensor.ops import elementwise as lt_functions
from lazytensor.kernels.ops import DTYPES, OPS

APPROX_ULPS = 8

BOOL = np.dtype(bool)
INTS = tuple(d for d in DTYPES if d.kind in "iu")
FLOATS = tuple(d for d in DTYPES if d.kind == "f")

APPROX_OPS = frozenset({"exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "sigmoid",
                        "log2", "log10", "exp2", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh",
                        "arcsinh", "arccosh", "arctanh", "hypot", "cbrt", "logaddexp", "logaddexp2"})
COMPARISONS = frozenset({"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"})
# Ops whose result can jump when an input moves by one ULP.
DISCONTINUOUS = COMPARISONS | {"floor", "ceil", "sign", "floor_divide", "remainder", "isnan", "isfinite",
                               "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "isinf", "signbit", "rint",
                               "trunc", "fmod", "copysign", "nextafter", "logical_and", "logical_or",
                               "logical_xor", "logical_not", "left_shift", "right_shift"}
# Continuous ops whose slope is unbounded somewhere (near a pole, a domain's edge, or growing like
# exp): downstream of an uncertain input they are not compared, as power.
STEEP = frozenset({"reciprocal", "log2", "log10", "exp2", "arcsin", "arccos", "arctan2", "sinh", "cosh",
                   "arccosh", "arctanh", "cbrt"})

BINARY_OPERATORS = {
    "add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "true_divide": operator.truediv,
    "floor_divide": operator.floordiv, "remainder": operator.mod, "power": operator.pow,
    "bitwise_and": operator.and_, "bitwise_or": operator.or_, "bitwise_xor": operator.xor,
    "equal": operator.eq, "not_equal": operator.ne, "less": operator.lt, "less_equal": operator.le,
    "greater": operator.gt, "greater_equal": operator.ge, "left_shift": operator.lshift,
    "right_shift": operator.rshift,
}
UNARY_OPS = tuple(name for name, spec in OPS.items() if spec.arity == 1)
BINARY_OPS = tuple(name for name, spec in OPS.items() if spec.arity == 2)

# Output shapes of a DAG: 0-d, size-1 dims, empty dims, odd sizes. All small, so the serial kernel
# variant runs and each example costs a compile, not a computation.
SHAPES = ((), (1,), (5,), (0,), (3, 4), (7, 13), (1, 1), (2, 1, 3), (4, 0), (3, 1, 5))


# ---------------------------------------------------------------------------------------------------
# the oracle's nodes


@dataclass
class Node:
    lt: object          # lazytensor Tensor or Expr
    np: np.ndarray      # NumPy's value of the same node
    err: object         # absolute error bound: 0.0 (exact), or an ndarray of the node's shape (inf: don't care)
    text: str           # a readable spelling, for failure reports
    depth: int = 0      # ops on the longest path from a leaf (a leaf: 0)

    @property
    def dtype(self):
        return self.np.dtype


@dataclass
class DrawnDag:
    expr: object                 # the lazytensor expression (root)
    expected: np.ndarray         # NumPy's eager value of the same DAG
    err: object                  # per-element error bound (0.0: compare exactly; inf: don't compare)
    text: str                    # the DAG, spelled out (shared nodes by name)
    raised: list = field(default_factory=list)   # ops NumPy and lazytensor both refused, with the error type
    nodes: list = field(default_factory=list)    # every node built on the way, each a DrawnDag (the root last):
                                                 # several expressions over shared leaves and subexpressions

    @property
    def dtype(self):
        return self.expected.dtype

    def check(self, actual=None):
        """Evaluate the expression (or take `actual`, a value of it) and compare it with NumPy's
        under the error-bound rules of `assert_matches`."""
        from lazytensor.assign.evaluate import to_numpy
        assert_matches(to_numpy(self.expr if actual is None else actual), self.expected, self.err, repr(self))

    def __repr__(self):
        return f"DrawnDag({self.text}, dtype={self.dtype}, shape={self.expected.shape})"


def _ulp(values, dtype) -> np.ndarray:
    """One unit in the last place of |values| in `dtype`, as float64 (inf where not finite)."""
    dtype = np.dtype(dtype)
    with np.errstate(all="ignore"):
        v = np.abs(np.asarray(values, dtype=np.float64)).astype(dtype)
        u = np.spacing(v).astype(np.float64)
    return np.where(np.isfinite(u), u, np.inf)


def _as_err(err, shape) -> np.ndarray:
    return np.broadcast_to(np.asarray(err, dtype=np.float64), shape)


def _is_exact(err) -> bool:
    return isinstance(err, float) and err == 0.0


def _errors_of(args):
    return [a.err if isinstance(a, Node) else 0.0 for a in args]


def _values_of(args):
    return [a.np if isinstance(a, Node) else a for a in args]


def _f64(x):
    return np.asarray(x, dtype=np.float64) if not isinstance(x, (int, float)) else np.float64(x)


def propagate(op, args, result, attrs=None):
    """The error bound of `result = op(*args)` (see the module docstring)."""
    errs = _errors_of(args)
    dtype = result.dtype
    shape = result.shape
    is_float = dtype.kind == "f"
    uncertain = [not _is_exact(e) for e in errs]
    if not any(uncertain):
        if op in APPROX_OPS or (op == "power" and is_float):
            return _approx_bound(op, args, result)
        return 0.0
    # Some input is uncertain.
    e = [_as_err(x, shape) for x in errs]
    if not is_float or op in DISCONTINUOUS or op == "power" or op in STEEP:
        # Integer / bool results, jumps, or power (whose slope is unbounded near 0): not compared
        # wherever an input is uncertain.
        return np.where(np.logical_or.reduce([x > 0 for x in e]), np.inf, 0.0)
    vals = [np.broadcast_to(_f64(v), shape) for v in _values_of(args)]
    r = result.astype(np.float64)
    with np.errstate(all="ignore"):
        if op in ("add", "subtract"):
            bound = e[0] + e[1]
        elif op == "multiply":
            bound = np.abs(vals[0]) * e[1] + np.abs(vals[1]) * e[0] + e[0] * e[1]
        elif op == "true_divide":
            denom = np.abs(vals[1]) - e[1]
            bound = np.where(denom > 0, (e[0] + np.abs(r) * e[1]) / denom, np.inf)
        elif op in ("maximum", "minimum"):
            bound = np.maximum(e[0], e[1])
        elif op == "where":
            cond = np.broadcast_to(np.asarray(args[0].np if isinstance(args[0], Node) else args[0], bool), shape)
            bound = np.where(e[0] > 0, np.inf, np.where(cond, e[1], e[2]))
        elif op in ("negative", "absolute", "relu", "sin", "cos", "tanh", "sigmoid", "astype", "fabs", "arctan",
                    "arcsinh", "real", "conjugate"):
            bound = e[0]                       # Lipschitz constant <= 1 (real, conjugate: of a real value, itself)
        elif op == "imag":
            bound = np.zeros(shape)            # of a real value: zeros, whatever its error
        elif op in ("hypot", "logaddexp", "logaddexp2"):
            bound = e[0] + e[1]                # Lipschitz constant <= 1 in each operand
        elif op == "square":
            bound = 2 * np.abs(vals[0]) * e[0] + e[0] * e[0]
        elif op in ("exp", "expm1"):
            bound = np.exp(vals[0] + e[0]) * e[0]      # the largest slope on the interval times its width
        elif op in ("log", "log1p", "sqrt"):
            lo = vals[0] - e[0] + (1.0 if op == "log1p" else 0.0)
            if op == "sqrt":
                bound = np.where(lo >= 0, np.sqrt(e[0]), np.inf)
            else:
                bound = np.where(lo > 0, e[0] / lo, np.inf)
        elif op == "tan":
            lo, hi = vals[0] - e[0], vals[0] + e[0]
            same_branch = np.cos(lo) * np.cos(hi) > 0
            slope = 1 + np.maximum(np.tan(lo) ** 2, np.tan(hi) ** 2)
            bound = np.where(same_branch & (e[0] < 0.5), slope * e[0], np.inf)
        else:
            raise AssertionError(f"no error propagation rule for {op}")
        if op in APPROX_OPS:
            bound = bound + _approx_bound(op, args, result)
        bound = bound + _ulp(r, dtype)         # this op's own rounding of a perturbed input
        fmax = float(np.finfo(dtype).max)
        bad = ~np.isfinite(r) | ~np.isfinite(bound) | (np.abs(r) + bound >= fmax)
        return np.where(bad & (bound > 0), np.inf, bound)


def _approx_bound(op, args, result):
    """Bound for a transcendental op on exact inputs: APPROX_ULPS ULP, subnormal slack, no
    comparison near overflow."""
    dtype = result.dtype
    fi = np.finfo(dtype)
    r = result.astype(np.float64)
    with np.errstate(all="ignore"):
        bound = APPROX_ULPS * _ulp(r, dtype) + np.where(np.abs(r) < float(fi.tiny), float(fi.tiny), 0.0)
        # Near the overflow threshold one side may round to inf and the other not.
        exact64 = np.abs(_reference64(op, args, result.shape))
        slack = APPROX_ULPS * float(fi.eps)
        near_overflow = (exact64 >= float(fi.max) * (1 - slack)) & (
            (exact64 <= float(fi.max) * (1 + slack)) | (np.isinf(exact64) & (dtype == np.float64)))
        bound = np.where(np.isfinite(r), bound, 0.0)   # inf and NaN results must match exactly
        return np.where(near_overflow, np.inf, bound)


def _reference64(op, args, shape):
    vals = [np.broadcast_to(_f64(v), shape) for v in _values_of(args)]
    with np.errstate(all="ignore"):
        if op == "power":
            return np.power(vals[0], vals[1])
        if op == "sigmoid":
            return 1 / (1 + np.exp(-vals[0]))
        return OPS[op].reference(*vals)


# ---------------------------------------------------------------------------------------------------
# building nodes


def _np_call(op, np_args, form="ufunc"):
    """NumPy's eager evaluation of one op, as the `form` lazytensor's side was written in;
    NumPy's warnings are expected and silenced."""
    with np.errstate(all="ignore"):
        if op == "power":
            return _np_power(*np_args, operator=form != "ufunc")
        if op == "where":
            _check_where_scalars(*np_args)
        return np.asarray(OPS[op].reference(*np_args))


def _check_where_scalars(cond, a, b):
    """np.where casts an out-of-range Python int to the result's integer dtype C-style
    (np.where(c, int8_array, 300) holds 44). lazytensor deliberately raises OverflowError there,
    as NumPy's ufuncs do for the same operands, so the oracle raises it too."""
    out = np.asarray(np.where(cond, a, b)).dtype
    for x in (a, b):
        if type(x) is int and out.kind in "iu" and not np.iinfo(out).min <= x <= np.iinfo(out).max:
            raise OverflowError(f"Python integer {x} out of bounds for {out.name}")


def _np_power(a, b, operator=False):
    """np.power, or NumPy's `**` operator (which squares a bool x ** 2 into int8, not int64), with
    lazytensor's documented result where NumPy refuses a negative integer exponent (ValueError):
    1 for base 1, +-1 for base -1, else 0 (kernels/cpu/numba_prelude.py)."""
    try:
        return np.asarray(a ** b if operator else np.power(a, b))
    except ValueError as exc:
        if "negative integer powers" not in str(exc):
            raise
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    if isinstance(b, np.ndarray):
        safe_b = np.where(b < 0, 0, b).astype(b.dtype)
    elif isinstance(b, np.generic):
        safe_b = b.dtype.type(0) if b < 0 else b
    else:
        safe_b = 0 if b < 0 else b
    out = np.asarray(np.power(a, safe_b))
    neg = np.broadcast_to(b_arr < 0, out.shape)
    base = np.broadcast_to(a_arr, out.shape)
    odd = np.broadcast_to(np.asarray(b_arr) % 2 != 0, out.shape)
    special = np.where(base == 1, 1, np.where(base == -1, np.where(odd, -1, 1), 0)).astype(out.dtype)
    return np.where(neg, special, out).astype(out.dtype)


def _lt_call(op, lt_args, form):
    """Build the same node with lazytensor, in one of the ways a user writes it."""
    if form == "operator" and op in BINARY_OPERATORS:
        return BINARY_OPERATORS[op](*lt_args)
    if form == "operator" and op == "negative":
        return -lt_args[0]
    if form == "operator" and op == "absolute":
        return abs(lt_args[0])
    if form == "operator" and op == "invert":
        return ~lt_args[0]
    if form == "ufunc" and isinstance(getattr(np, op, None), np.ufunc):
        with np.errstate(all="ignore"):
            return getattr(np, op)(*lt_args)     # NumPy's ufunc protocol -> the same lazy node
    if op == "true_divide":
        return lt_args[0] / lt_args[1]
    if op in BINARY_OPERATORS:
        return BINARY_OPERATORS[op](*lt_args)
    if hasattr(lt_functions, op):
        return getattr(lt_functions, op)(*lt_args)
    return apply(op, *lt_args)                  # an op of the table with no lt function (yet)


def _depth(args) -> int:
    return 1 + max((a.depth for a in args if isinstance(a, Node)), default=0)


def _text(x):
    if isinstance(x, Node):
        return x.text
    if isinstance(x, np.generic):
        return f"np.{x.dtype.name}({x.item()!r})"
    return repr(x)


def _same_error_kind(np_exc, lt_exc):
    for kind in (OverflowError, TypeError, ValueError):
        if isinstance(np_exc, kind):
            return isinstance(lt_exc, kind)
    return type(np_exc) is type(lt_exc)


class Refused(Exception):
    """NumPy and lazytensor both refused the op (same error type): leave it out."""


def build(op, args, form="function", text=None):
    """Apply `op` to oracle nodes / scalars on both sides; check both refuse alike."""
    np_args = _values_of(args)
    lt_args = [a.lt if isinstance(a, Node) else a for a in args]
    np_exc = lt_exc = None
    try:
        expected = _np_call(op, np_args, form)
    except Exception as exc:   # noqa: BLE001 - compared with lazytensor's below
        np_exc = exc
    try:
        expr = _lt_call(op, lt_args, form)
    except Exception as exc:   # noqa: BLE001
        lt_exc = exc
    if np_exc is not None or lt_exc is not None:
        assert np_exc is not None and lt_exc is not None and _same_error_kind(np_exc, lt_exc), (
            f"{op}({', '.join(map(_text, args))}) [{form}]: NumPy raised {np_exc!r}, lazytensor raised {lt_exc!r}")
        raise Refused(f"{op}: {type(np_exc).__name__}")
    assert isinstance(expr, Expr), f"{op} built {type(expr).__name__}, not an Expr"
    assert expr.dtype == expected.dtype, (
        f"{op}({', '.join(map(_text, args))}): lazytensor dtype {expr.dtype}, NumPy {expected.dtype}")
    assert expr.shape == expected.shape, (
        f"{op}({', '.join(map(_text, args))}): lazytensor shape {expr.shape}, NumPy {expected.shape}")
    spelled = text or f"{op}({', '.join(map(_text, args))})"
    err = propagate(op, args, expected)
    if op in ("maximum", "minimum", "relu"):
        err = _zero_ties_unspecified(np_args + ([0.0] if op == "relu" else []), expected, err)
    if op == "reciprocal" and expected.dtype.kind in "iu":
        # 1 // 0: NumPy's value depends on the width (0, or the minimum from a float cast of inf);
        # lazytensor documents 0. Not compared.
        err = np.where(np.broadcast_to(np.asarray(np_args[0]) == 0, expected.shape), np.inf, _as_err(err, expected.shape))
    return Node(expr, expected, err, spelled, _depth(args))


def build_astype(node: Node, dtype) -> Node:
    dtype = np.dtype(dtype)
    expr = node.lt.astype(dtype)
    with np.errstate(all="ignore"):
        expected = np.asarray(node.np.astype(dtype))
    if _is_exact(node.err):
        err = 0.0
    elif dtype.kind == "f":
        err = propagate("astype", [node], expected)
    else:                                       # to an integer or bool: a jump
        err = np.where(_as_err(node.err, expected.shape) > 0, np.inf, 0.0)
    if node.dtype.kind == "f" and dtype.kind in "iu":
        # NaN, inf and out-of-range floats cast to integers are undefined behaviour (C, NumPy warns).
        ii = np.iinfo(dtype)
        with np.errstate(all="ignore"):
            t = np.trunc(node.np.astype(np.float64))
            # the bound is exclusive and exact: float(ii.max) rounds up to 2**bits (uint64: 2**64), itself out of range
            undefined = ~np.isfinite(t) | (t < ii.min) | (t >= 2.0 ** (ii.bits - (ii.min < 0)))
        err = np.where(undefined, np.inf, _as_err(err, expected.shape))
    return Node(expr, expected, err, f"{node.text}.astype({dtype.name})", node.depth + 1)


def _zero_ties_unspecified(values, result, err):
    """max/min of -0.0 and +0.0: IEEE 754 lets either come out, and NumPy's own loops disagree
    (float32/float64 maximum returns the second operand, float16 maximum and np.clip the first).
    Operands are seen as the loop sees them, in the result dtype: a tiny Python float bound is a
    zero in float16. Such elements are not compared (and neither is anything computed from them)."""
    if result.dtype.kind != "f":
        return err
    with np.errstate(all="ignore"):
        zeros = [np.broadcast_to(np.asarray(v).astype(result.dtype), result.shape) for v in values if v is not None]
        neg = np.logical_or.reduce([(z == 0) & np.signbit(z) for z in zeros])
        pos = np.logical_or.reduce([(z == 0) & ~np.signbit(z) for z in zeros])
    tie = neg & pos & (result == 0)
    if not tie.any():
        return err
    return np.where(tie, np.inf, _as_err(err, result.shape))


def build_clip(x: Node, lo, hi) -> Node:
    lt_lo = lo.lt if isinstance(lo, Node) else lo
    lt_hi = hi.lt if isinstance(hi, Node) else hi
    np_exc = lt_exc = None
    try:
        with np.errstate(all="ignore"):
            expected = np.asarray(np.clip(x.np, _values_of([lo])[0], _values_of([hi])[0]))
    except Exception as exc:  # noqa: BLE001
        np_exc = exc
    try:
        expr = lt_functions.clip(x.lt, lt_lo, lt_hi)
    except Exception as exc:  # noqa: BLE001
        lt_exc = exc
    if np_exc is not None or lt_exc is not None:
        assert np_exc is not None and lt_exc is not None and _same_error_kind(np_exc, lt_exc), (
            f"clip({x.text}, {_text(lo)}, {_text(hi)}): NumPy raised {np_exc!r}, lazytensor raised {lt_exc!r}")
        raise Refused(f"clip: {type(np_exc).__name__}")
    assert expr.dtype == expected.dtype, f"clip({x.text}, {_text(lo)}, {_text(hi)}): {expr.dtype} vs NumPy {expected.dtype}"
    errs = [_as_err(e, expected.shape) for e in _errors_of([x, lo, hi]) if not _is_exact(e)]
    err = 0.0
    if errs:
        bound = np.maximum.reduce(errs) + _ulp(expected, expected.dtype) if expected.dtype.kind == "f" else np.inf
        err = np.where(np.maximum.reduce(errs) > 0, bound, 0.0)
    err = _zero_ties_unspecified(_values_of([x, lo, hi]), expected, err)
    return Node(expr, expected, err, f"clip({x.text}, {_text(lo)}, {_text(hi)})", _depth([x, lo, hi]))


# ---------------------------------------------------------------------------------------------------
# comparison


def assert_matches(actual, expected, err=0.0, context=""):
    """lazytensor's value vs NumPy's: exact for bool/int and for exact float nodes, within the
    propagated bound elsewhere; NaN in the same places, the same infinities, and the same sign of
    zero where the value is exact."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{context}: dtype {actual.dtype}, NumPy {expected.dtype}"
    assert actual.shape == expected.shape, f"{context}: shape {actual.shape}, NumPy {expected.shape}"
    err = _as_err(err, expected.shape)
    compared = np.isfinite(err) if err.size else np.ones(expected.shape, bool)
    if expected.dtype.kind != "f":
        bad = compared & (actual != expected)
    else:
        a = actual.astype(np.float64)
        e = expected.astype(np.float64)
        exact = compared & (err == 0)
        same = (a == e) | (np.isnan(a) & np.isnan(e))
        with np.errstate(all="ignore"):
            close = (np.abs(a - e) <= err) & np.isfinite(a) & np.isfinite(e) | (a == e) | (np.isnan(a) & np.isnan(e))
        sign_ok = ~((a == 0) & (e == 0)) | (np.signbit(a) == np.signbit(e))
        bad = (exact & ~(same & sign_ok)) | (compared & ~exact & ~close)
    if bad.any():
        idx = tuple(np.argwhere(bad)[0]) if bad.ndim else ()
        lines = [f"{context}",
                 f"{int(bad.sum())} of {bad.size} elements differ; first at {idx}: "
                 f"lazytensor {actual[idx]!r}, NumPy {expected[idx]!r}, bound {err[idx]!r}"]
        raise AssertionError("\n".join(lines))

