"""The table of elementwise ops: one row per op feeds the frontend (dtype rules), both code
generators (CUDA C and numba snippets) and the tests (the NumPy reference).

Design: docs/design/kernels.md, section "kernels/ops.py".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import ml_dtypes
import numpy as np


# NumPy's float16 nextafter of equal operands (nextafter(0.0, -0.0)): x up to NumPy 2.4
# (npy_half_nextafter), y from 2.5 on (C's nextafter, as its float32 and float64 loops give). The
# kernels follow the installed NumPy, as the interpreter tier does (it runs NumPy's loop); the choice
# is part of each kernel's text, so a kernel cached under another NumPy is not reused.
HALF_NEXTAFTER_EQUAL_GIVES_Y = bool(np.signbit(np.nextafter(np.float16(0.0), np.float16(-0.0))))


@dataclass(frozen=True)
class OpSpec:
    name: str
    arity: int
    reference: Callable          # NumPy eager meaning of the op: the oracle of the tests
    dtype_rule: Callable         # (operand dtypes or weak Python types) -> (loop dtypes, result dtype)
    c: dict = field(repr=False)  # snippets for CUDA C
    py: dict = field(repr=False)  # snippets for numba
    symbol: str | None = None    # infix spelling for repr/explain, e.g. '+'

    def snippet(self, lang: str, kinds: str, bits: int | None = None, bfloat16: bool = False) -> str:
        """The snippet for operands of `kinds` (one letter each) `bits` wide; bfloat16 operands take
        a "bf16" snippet where the op has one, else the generic float one (never float16's)."""
        table = self.c if lang == "c" else self.py
        first = "bf16" if bfloat16 else (f"{kinds}{bits}" if bits else kinds)
        for k in (first, kinds, kinds[0], "*"):
            if k in table:
                return table[k]
        raise KeyError(f"op {self.name!r} has no {lang} snippet for operand kinds {kinds!r}")


def ufunc_rule(ufunc: np.ufunc) -> Callable:
    """NumPy's own type resolution (NEP 50: Python int/float passed as types are weak)."""
    def rule(types):
        resolved = ufunc.resolve_dtypes((*types, None))
        return resolved[:-1], resolved[-1]
    return rule


def _relu_rule(types):
    (x,) = types
    loop = np.maximum.resolve_dtypes((x, int, None))
    return (loop[0],), loop[-1]


def _sigmoid_rule(types):
    loop = np.exp.resolve_dtypes((types[0], None))
    return loop[:1], loop[-1]


def _where_rule(types):
    _, a, b = types
    # The types int and float stand for weak Python scalars (NEP 50); np.result_type would read
    # them as the strong default dtypes, so give it a weak value of that kind instead.
    out = np.result_type(*(t(0) if t is int or t is float or t is complex else t for t in (a, b)))
    return (np.dtype(bool), out, out), out


def _relu_reference(x):
    return np.maximum(x, 0)


def _sigmoid_reference(x):
    x = np.asarray(x)
    dt = np.exp.resolve_dtypes((x.dtype, None))[-1]
    x = x.astype(dt)
    with np.errstate(over="ignore"):
        return (dt.type(1) / (dt.type(1) + np.exp(-x))).astype(dt)


# Comparisons between int64 and uint64 are exact in NumPy 2 (a negative int64 is below every uint64);
# C and numba would convert the signed side, so the mixed kinds get snippets of their own.
def _compare(name, sym):
    c_iu = {"<": "({0} < 0 || (unsigned long long)({0}) < {1})",
            "<=": "({0} < 0 || (unsigned long long)({0}) <= {1})",
            ">": "({0} >= 0 && (unsigned long long)({0}) > {1})",
            ">=": "({0} >= 0 && (unsigned long long)({0}) >= {1})",
            "==": "({0} >= 0 && (unsigned long long)({0}) == {1})",
            "!=": "({0} < 0 || (unsigned long long)({0}) != {1})"}[sym]
    c_ui = {"<": "({1} >= 0 && {0} < (unsigned long long)({1}))",
            "<=": "({1} >= 0 && {0} <= (unsigned long long)({1}))",
            ">": "({1} < 0 || {0} > (unsigned long long)({1}))",
            ">=": "({1} < 0 || {0} >= (unsigned long long)({1}))",
            "==": "({1} >= 0 && {0} == (unsigned long long)({1}))",
            "!=": "({1} < 0 || {0} != (unsigned long long)({1}))"}[sym]
    py_iu = c_iu.replace("(unsigned long long)", "np.uint64").replace("||", "or").replace("&&", "and")
    py_ui = c_ui.replace("(unsigned long long)", "np.uint64").replace("||", "or").replace("&&", "and")
    return OpSpec(name, 2, getattr(np, name), ufunc_rule(getattr(np, name)),
                  c={"iu": c_iu, "ui": c_ui, "*": f"({{0}} {sym} {{1}})"},
                  py={"iu": py_iu, "ui": py_ui, "*": f"({{0}} {sym} {{1}})"}, symbol=sym)


def _unary_float(name, c_fn, py_fn=None):
    """A float math function; NumPy's rule sends ints and bools to a float loop first."""
    ufunc = getattr(np, name)
    return OpSpec(name, 1, ufunc, ufunc_rule(ufunc),
                  c={"f": f"{c_fn}({{0}})"}, py={"f": f"{py_fn or 'np.' + name}({{0}})"})


# Signed integer add/sub/mul/neg wrap in NumPy; in C signed overflow is undefined, so go unsigned.
_WRAP = "({T})(({U})({0}) {op} ({U})({1}))"

_SPECS = [
    OpSpec("add", 2, np.add, ufunc_rule(np.add), symbol="+",
           c={"b": "({0} || {1})", "i": _WRAP.replace("{op}", "+"), "*": "({0} + {1})"},
           py={"b": "({0} or {1})", "*": "({0} + {1})"}),
    OpSpec("subtract", 2, np.subtract, ufunc_rule(np.subtract), symbol="-",
           c={"i": _WRAP.replace("{op}", "-"), "*": "({0} - {1})"}, py={"*": "({0} - {1})"}),
    OpSpec("multiply", 2, np.multiply, ufunc_rule(np.multiply), symbol="*",
           c={"b": "({0} && {1})", "i": _WRAP.replace("{op}", "*"), "*": "({0} * {1})"},
           py={"b": "({0} and {1})", "*": "({0} * {1})"}),
    OpSpec("true_divide", 2, np.true_divide, ufunc_rule(np.true_divide), symbol="/",
           c={"f": "({0} / {1})"}, py={"f": "({0} / {1})"}),
    OpSpec("floor_divide", 2, np.floor_divide, ufunc_rule(np.floor_divide), symbol="//",
           c={"i": "lt_floordiv_i({0}, {1})", "u": "lt_div_u({0}, {1})", "f": "lt_floordiv_f({0}, {1})"},
           py={"i": "lt_floordiv_i({0}, {1})", "u": "lt_div_u({0}, {1})", "f": "lt_floordiv_f({0}, {1})"}),
    OpSpec("remainder", 2, np.remainder, ufunc_rule(np.remainder), symbol="%",
           c={"i": "lt_mod_i({0}, {1})", "u": "lt_mod_u({0}, {1})", "f": "lt_mod_f({0}, {1})"},
           py={"i": "lt_mod_i({0}, {1})", "u": "lt_mod_u({0}, {1})", "f": "lt_mod_f({0}, {1})"}),
    OpSpec("power", 2, np.power, ufunc_rule(np.power), symbol="**",
           c={"i": "lt_pow_i({0}, {1})", "u": "lt_pow_u({0}, {1})", "f": "pow({0}, {1})",
              "bf16": "lt_pow_bf16({0}, {1})"},
           py={"i": "lt_pow_i({0}, {1})", "u": "lt_pow_u({0}, {1})", "f": "lt_pow_f({0}, {1})"}),
    OpSpec("square", 1, np.square, ufunc_rule(np.square),
           c={"b": "({0} && {0})", "i": _WRAP.replace("{op}", "*").replace("{1}", "{0}"), "*": "({0} * {0})"},
           py={"b": "({0} and {0})", "*": "({0} * {0})"}),
    # Floats: NaN propagates; on a tie (-0.0 vs 0.0) the second operand wins, as in NumPy's float32
    # and float64 loops, and the first in float16, as in NumPy's float16 loop.
    OpSpec("maximum", 2, np.maximum, ufunc_rule(np.maximum),
           c={"b": "({0} || {1})", "f16": "(({0} >= {1} || {0} != {0}) ? {0} : {1})",
              "f": "(({0} > {1} || {0} != {0}) ? {0} : {1})", "*": "({0} >= {1} ? {0} : {1})"},
           py={"b": "({0} or {1})", "f16": "({0} if ({0} >= {1} or {0} != {0}) else {1})",
               "f": "({0} if ({0} > {1} or {0} != {0}) else {1})", "*": "({0} if {0} >= {1} else {1})"}),
    OpSpec("minimum", 2, np.minimum, ufunc_rule(np.minimum),
           c={"b": "({0} && {1})", "f16": "(({0} <= {1} || {0} != {0}) ? {0} : {1})",
              "f": "(({0} < {1} || {0} != {0}) ? {0} : {1})", "*": "({0} <= {1} ? {0} : {1})"},
           py={"b": "({0} and {1})", "f16": "({0} if ({0} <= {1} or {0} != {0}) else {1})",
               "f": "({0} if ({0} < {1} or {0} != {0}) else {1})", "*": "({0} if {0} <= {1} else {1})"}),
    _compare("equal", "=="), _compare("not_equal", "!="), _compare("less", "<"),
    _compare("less_equal", "<="), _compare("greater", ">"), _compare("greater_equal", ">="),
    OpSpec("bitwise_and", 2, np.bitwise_and, ufunc_rule(np.bitwise_and), symbol="&",
           c={"*": "({0} & {1})"}, py={"b": "({0} and {1})", "*": "({0} & {1})"}),
    OpSpec("bitwise_or", 2, np.bitwise_or, ufunc_rule(np.bitwise_or), symbol="|",
           c={"*": "({0} | {1})"}, py={"b": "({0} or {1})", "*": "({0} | {1})"}),
    OpSpec("bitwise_xor", 2, np.bitwise_xor, ufunc_rule(np.bitwise_xor), symbol="^",
           c={"*": "({0} ^ {1})"}, py={"b": "({0} != {1})", "*": "({0} ^ {1})"}),
    OpSpec("invert", 1, np.invert, ufunc_rule(np.invert),
           c={"b": "(!{0})", "*": "(~{0})"}, py={"b": "(not {0})", "*": "(~{0})"}),
    OpSpec("negative", 1, np.negative, ufunc_rule(np.negative),
           c={"i": "({T})(({U})0 - ({U})({0}))", "*": "(-{0})"}, py={"*": "(-{0})"}),
    OpSpec("absolute", 1, np.absolute, ufunc_rule(np.absolute),
           c={"b": "{0}", "u": "{0}", "i": "({0} < 0 ? ({T})(({U})0 - ({U})({0})) : {0})", "f": "fabs({0})"},
           py={"b": "{0}", "u": "{0}", "*": "abs({0})"}),
    OpSpec("sign", 1, np.sign, ufunc_rule(np.sign),
           c={"u": "({T})({0} > 0)", "i": "({T})(({0} > 0) - ({0} < 0))",
              "f": "({0} > 0 ? 1 : ({0} < 0 ? -1 : ({0} == 0 ? 0 : {0})))",
              "bf16": "({0} > 0 ? 1.0f : ({0} < 0 ? -1.0f : {0}))"},
           py={"u": "(1 if {0} > 0 else 0)", "i": "(1 if {0} > 0 else (-1 if {0} < 0 else 0))",
               "f": "(1.0 if {0} > 0 else (-1.0 if {0} < 0 else ({0} if {0} != {0} else 0.0)))",
               "bf16": "(1.0 if {0} > 0 else (-1.0 if {0} < 0 else {0}))"}),   # ml_dtypes': sign(-0.0) is -0.0
    OpSpec("floor", 1, np.floor, ufunc_rule(np.floor), c={"f": "floor({0})", "*": "{0}"},
           py={"f": "np.floor({0})", "*": "{0}"}),
    OpSpec("ceil", 1, np.ceil, ufunc_rule(np.ceil), c={"f": "ceil({0})", "*": "{0}"},
           py={"f": "np.ceil({0})", "*": "{0}"}),
    OpSpec("isnan", 1, np.isnan, ufunc_rule(np.isnan), c={"f": "isnan({0})", "*": "false"},
           py={"f": "np.isnan({0})", "*": "False"}),
    OpSpec("isfinite", 1, np.isfinite, ufunc_rule(np.isfinite), c={"f": "isfinite({0})", "*": "true"},
           py={"f": "np.isfinite({0})", "*": "True"}),
    # numba: float32 and float16 loops call branch-free float32 code that vectorizes (exp, log, tanh,
    # sigmoid, sin, cos: kernels/cpu/numba_vector_math.py); libm's, called per element, kept the loop scalar
    OpSpec("exp", 1, np.exp, ufunc_rule(np.exp), c={"f": "exp({0})"},
           py={"f32": "lt_exp_f32({0})", "f16": "lt_exp_f32({0})", "bf16": "lt_exp_f32({0})", "f": "np.exp({0})"}),
    OpSpec("log", 1, np.log, ufunc_rule(np.log), c={"f": "log({0})"},
           py={"f32": "lt_log_f32({0})", "f16": "lt_log_f32({0})", "bf16": "lt_log_f32({0})", "f": "np.log({0})"}),
    _unary_float("log1p", "log1p"),
    _unary_float("expm1", "expm1"), _unary_float("sqrt", "sqrt"),
    OpSpec("sin", 1, np.sin, ufunc_rule(np.sin), c={"f": "sin({0})"},
           py={"f32": "lt_sin_f32({0})", "f16": "lt_sin_f32({0})", "bf16": "lt_sin_f32({0})", "f": "np.sin({0})"}),
    OpSpec("cos", 1, np.cos, ufunc_rule(np.cos), c={"f": "cos({0})"},
           py={"f32": "lt_cos_f32({0})", "f16": "lt_cos_f32({0})", "bf16": "lt_cos_f32({0})", "f": "np.cos({0})"}),
    _unary_float("tan", "tan"),
    OpSpec("tanh", 1, np.tanh, ufunc_rule(np.tanh), c={"f": "tanh({0})"},
           py={"f32": "lt_tanh_f32({0})", "f16": "lt_tanh_f32({0})", "bf16": "lt_tanh_f32({0})", "f": "np.tanh({0})"}),
    OpSpec("sigmoid", 1, _sigmoid_reference, _sigmoid_rule,
           c={"f": "(({T})1 / (({T})1 + exp(-{0})))"},
           py={"f32": "lt_sigmoid_f32({0})", "f16": "lt_sigmoid_f32({0})", "bf16": "lt_sigmoid_f32({0})", "f": "lt_sigmoid({0})"}),
    OpSpec("relu", 1, _relu_reference, _relu_rule,
           c={"f": "(({0} > 0 || {0} != {0}) ? {0} : ({T})0)", "*": "({0} > 0 ? {0} : ({T})0)"},
           py={"f": "({0} if ({0} > 0 or {0} != {0}) else 0.0)", "*": "({0} if {0} > 0 else {T}(0))"}),
    OpSpec("where", 3, np.where, _where_rule,
           c={"*": "({0} ? {1} : {2})"}, py={"*": "({1} if {0} else {2})"}),
]



# -- NumPy's further ufuncs ----------------------------------------------------------------

def _binary_float(name, c_fn, py_fn=None, py_args="{0}, {1}"):
    """A float function of two operands; NumPy's rule sends ints and bools to a float loop first."""
    ufunc = getattr(np, name)
    return OpSpec(name, 2, ufunc, ufunc_rule(ufunc),
                  c={"f": f"{c_fn}({{0}}, {{1}})"}, py={"f": f"{py_fn or 'np.' + name}({py_args})"})


def _logaddexp_py(tie: str, scale: str, power: str) -> str:
    """npy_logaddexp / npy_logaddexp2 as one numba expression over float64: equal operands (infinities
    of one sign too) give x + tie; otherwise the larger plus scale * log1p(power(-|x - y|)); NaN gives NaN."""
    x, y = "float({0})", "float({1})"
    def side(big, small):
        return f"{big} + {scale} * math.log1p({power.format(d=f'{small} - {big}')})"
    return (f"({x} + {tie} if {x} == {y} else ({side(x, y)} if {x} - {y} > 0 else "
            f"({side(y, x)} if {x} - {y} <= 0 else {x} - {y})))")


def _logical(name, c_op, py_op):
    """NumPy's logical ufuncs take any dtype and test each operand against zero (NaN is true)."""
    ufunc = getattr(np, name)
    return OpSpec(name, 2, ufunc, ufunc_rule(ufunc),
                  c={"*": f"(({{0}} != 0) {c_op} ({{1}} != 0))"}, py={"*": f"(({{0}} != 0) {py_op} ({{1}} != 0))"})


_SPECS += [
    _unary_float("log2", "log2"), _unary_float("log10", "log10"), _unary_float("exp2", "exp2"),
    _unary_float("arcsin", "asin"), _unary_float("arccos", "acos"), _unary_float("arctan", "atan"),
    _unary_float("sinh", "sinh"), _unary_float("cosh", "cosh"), _unary_float("arcsinh", "asinh"),
    _unary_float("arccosh", "acosh"), _unary_float("arctanh", "atanh"), _unary_float("cbrt", "cbrt"),
    _unary_float("fabs", "fabs"), _unary_float("rint", "rint"),
    OpSpec("trunc", 1, np.trunc, ufunc_rule(np.trunc), c={"f": "trunc({0})", "*": "{0}"},
           py={"f": "np.trunc({0})", "*": "{0}"}),
    OpSpec("isinf", 1, np.isinf, ufunc_rule(np.isinf), c={"f": "isinf({0})", "*": "false"},
           py={"f": "np.isinf({0})", "*": "False"}),
    # The sign bit, so also of -0.0 and of a NaN with its sign set.
    OpSpec("signbit", 1, np.signbit, ufunc_rule(np.signbit), c={"f": "signbit({0})"}, py={"f": "np.signbit({0})"}),
    # Integer reciprocal is C's 1 / x: 1 and -1 stay, everything else truncates to 0. NumPy's value
    # for x == 0 depends on the width (0 for 8 and 16 bits, the minimum for 32 and 64); ours is 0.
    OpSpec("reciprocal", 1, np.reciprocal, ufunc_rule(np.reciprocal),
           c={"i": "({T})({0} == 1 ? 1 : ({0} == -1 ? -1 : 0))", "u": "({T})({0} == 1)", "f": "(({T})1 / {0})"},
           py={"i": "(1 if {0} == 1 else (-1 if {0} == -1 else 0))", "u": "(1 if {0} == 1 else 0)",
               "f": "({T}(1) / {0})"}),
    OpSpec("logical_not", 1, np.logical_not, ufunc_rule(np.logical_not), c={"*": "({0} == 0)"}, py={"*": "({0} == 0)"}),
    _binary_float("arctan2", "atan2"), _binary_float("hypot", "hypot"), _binary_float("copysign", "copysign"),
    # numba: NumPy's npy_logaddexp(2) written out in float64 with math's functions (the prelude's
    # inlined helper, called twice in one kernel with float32 and float64 operands, lowered np.exp2
    # with the other call's types); the result is rounded to the loop dtype as every op's is
    OpSpec("logaddexp", 2, np.logaddexp, ufunc_rule(np.logaddexp), c={"f": "lt_logaddexp({0}, {1})"},
           py={"f": _logaddexp_py("0.6931471805599453", "1.0", "math.exp({d})")}),
    OpSpec("logaddexp2", 2, np.logaddexp2, ufunc_rule(np.logaddexp2), c={"f": "lt_logaddexp2({0}, {1})"},
           py={"f": _logaddexp_py("1.0", "1.4426950408889634", "2.0 ** ({d})")}),
    # C's nextafter for float32/float64; float16 steps to the neighbouring half (a helper of its own),
    # equal operands giving what the installed NumPy's float16 loop gives (HALF_NEXTAFTER_EQUAL_GIVES_Y).
    OpSpec("nextafter", 2, np.nextafter, ufunc_rule(np.nextafter),
           c={"f": "lt_nextafter<{N}>({0}, {1})", "bf16": "lt_nextafter_bf16({0}, {1})"},
           py={"f16": f"lt_nextafter({{0}}, {{1}}, 16, {HALF_NEXTAFTER_EQUAL_GIVES_Y})", "bf16": "lt_nextafter_bf16({0}, {1})",
               "f": "lt_nextafter({0}, {1}, {N})"}),
    # fmod: the remainder with the dividend's sign (C's); x fmod 0 and MIN fmod -1 are 0, as NumPy gives.
    OpSpec("fmod", 2, np.fmod, ufunc_rule(np.fmod),
           c={"i": "lt_fmod_i({0}, {1})", "u": "lt_mod_u({0}, {1})", "f": "fmod({0}, {1})"},
           py={"i": "lt_fmod_i({0}, {1})", "u": "lt_mod_u({0}, {1})", "f": "np.fmod({0}, {1})"}),
    _logical("logical_and", "&&", "and"), _logical("logical_or", "||", "or"), _logical("logical_xor", "!=", "!="),
    # NumPy's shifts by the dtype's width or more (or by a negative count) give 0, or -1 for a
    # negative signed value shifted right; C leaves them undefined, so the snippets test the count.
    OpSpec("left_shift", 2, np.left_shift, ufunc_rule(np.left_shift), symbol="<<",
           c={"i": "((({1}) >= 0 && ({1}) < {N}) ? ({T})(({U})({0}) << ({1})) : ({T})0)",
              "u": "(({1}) < {N} ? ({T})(({0}) << ({1})) : ({T})0)"},
           py={"i": "(({0} << {1}) if 0 <= {1} < {N} else {T}(0))",
               "u": "(({0} << {1}) if {1} < {N} else {T}(0))"}),
    OpSpec("right_shift", 2, np.right_shift, ufunc_rule(np.right_shift), symbol=">>",
           c={"i": "((({1}) >= 0 && ({1}) < {N}) ? ({T})(({0}) >> ({1})) : ({T})(({0}) < 0 ? -1 : 0))",
              "u": "(({1}) < {N} ? ({T})(({0}) >> ({1})) : ({T})0)"},
           py={"i": "(({0} >> {1}) if 0 <= {1} < {N} else ({T}(-1) if {0} < 0 else {T}(0)))",
               "u": "(({0} >> {1}) if {1} < {N} else {T}(0))"}),
]



# -- complex ---------------------------------------------------------------------------------------
# complex64 and complex128 (kind 'c'): numba holds them as its complex types and computes with its own
# ports of NumPy's complex functions; CUDA C holds them in lt_c64 / lt_c128 (kernels/cuda/complex_prelude.py),
# whose operators make the generic '*' snippets (+, -, *, ==, !=, unary -) serve them too.
def _part_rule(types):
    """real and imag (np.real, np.imag): a complex value's part in the real dtype of its width; of a
    real value, x itself or zeros of its dtype."""
    (x,) = types
    x = {complex: np.dtype(complex), float: np.dtype(float), int: np.dtype(int)}.get(x, x)
    x = np.dtype(x)
    return (x,), real_dtype(x)


_SPECS += [
    OpSpec("real", 1, np.real, _part_rule, c={"c": "{0}.re", "*": "{0}"}, py={"c": "{0}.real", "*": "{0}"}),
    OpSpec("imag", 1, np.imag, _part_rule, c={"c": "{0}.im", "b": "false", "*": "(({T})0)"},
           py={"c": "{0}.imag", "b": "False", "*": "{T}(0)"}),
    OpSpec("conjugate", 1, np.conjugate, ufunc_rule(np.conjugate),
           c={"c": "lt_conj({0})", "*": "{0}"}, py={"c": "np.conjugate({0})", "*": "{0}"}),
]

# op -> (CUDA C snippet, numba snippet) for complex operands; an op without its row (nor a '*'
# snippet that is right for complex) refuses complex operands (COMPLEX_OPS).
_COMPLEX_SNIPPETS = {
    "true_divide": ("lt_cdiv({0}, {1})", "lt_cdiv{N}({0}, {1})"),
    "power": ("lt_cpow({0}, {1})", "lt_cpow({0}, {1}, {T}(1))"),
    "absolute": ("lt_cabs({0})", "lt_cabs({0})"),
    "sign": ("lt_csign({0})", "lt_csign{N}({0})"),
    "reciprocal": ("lt_crecip({0})", "lt_crecip{N}({0})"),
    "isnan": ("(isnan({0}.re) || isnan({0}.im))", "(np.isnan({0}.real) or np.isnan({0}.imag))"),
    "isinf": ("(isinf({0}.re) || isinf({0}.im))", "(np.isinf({0}.real) or np.isinf({0}.imag))"),
    "isfinite": ("(isfinite({0}.re) && isfinite({0}.im))", "(np.isfinite({0}.real) and np.isfinite({0}.imag))"),
    **{name: (f"lt_c{name}({{0}})", f"np.{name}({{0}})") for name in (
        "sqrt", "arcsin", "arccos", "arctan", "arcsinh", "arctanh")},
    "log1p": ("lt_clog1p_numpy({0})", "lt_clog1p{N}({0})"),
    # np.rint (np.round) of a complex value rounds each part (half to even), as the Array API's round.
    "rint": ("lt_crint({0})", "{T}(complex(np.rint({0}.real), np.rint({0}.imag)))"),
    "expm1": ("lt_cexpm1({0})", "lt_cexpm1_{N}({0})"),
    "exp2": ("lt_cexp2({0})", "lt_cexp2_{N}({0})"),
    # (numba's own special values of these differ from C99's on the axes: kernels/cpu/numba_complex.py)
    **{name: (f"lt_c{name}({{0}})", f"lt_c{name}({{0}})") for name in (
        "exp", "log", "log2", "log10", "sin", "cos", "tan", "sinh", "cosh", "tanh", "arccosh")},
}
# Ops whose generic snippet is already right for complex operands.
_COMPLEX_GENERIC = ("add", "subtract", "multiply", "square", "negative", "equal", "not_equal", "where",
                    "logical_not", "logical_and", "logical_or", "logical_xor", "real", "imag", "conjugate")
COMPLEX_OPS = frozenset(_COMPLEX_SNIPPETS) | frozenset(_COMPLEX_GENERIC)


def _refusing_complex(spec: OpSpec) -> OpSpec:
    """spec with a dtype rule that refuses complex loop dtypes (NumPy has them for ordering, rounding and
    maximum/minimum, meanings the Array API leaves out and the kernels do not implement)."""
    rule = spec.dtype_rule

    def refusing(types):
        loops, out = rule(types)
        if any(np.dtype(t).kind == "c" for t in loops):
            raise TypeError(f"{spec.name} is not defined for complex dtypes in lazytensor")
        return loops, out
    return OpSpec(spec.name, spec.arity, spec.reference, refusing, spec.c, spec.py, spec.symbol)


# numba's complex64 functions compute in float32, where an intermediate overflows long before the
# result does (exp(89 + 1j), sqrt(3e38j)); NumPy's (glibc's) scale. complex64 values of these functions
# are computed in complex128 and rounded once.
_IN_DOUBLE = ("exp", "log", "log2", "log10", "sqrt", "sin", "cos", "tan", "sinh",
              "cosh", "tanh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh")

for _spec in _SPECS:
    if _spec.name in _COMPLEX_SNIPPETS:
        _spec.c["c"], _spec.py["c"] = _COMPLEX_SNIPPETS[_spec.name]
        if _spec.name in _IN_DOUBLE:
            _spec.py["c64"] = _spec.py["c"].replace("({0})", "(np.complex128({0}))")
OPS_POWER_C64 = "lt_cpow(np.complex128({0}), np.complex128({1}), np.complex128(1))"     # (exp(b log a) in float32 loses digits)
next(s for s in _SPECS if s.name == "power").py["c64"] = OPS_POWER_C64
_SPECS = [s if s.name in COMPLEX_OPS else _refusing_complex(s) for s in _SPECS]

OPS: dict[str, OpSpec] = {spec.name: spec for spec in _SPECS}

# NumPy's dtypes, which every backend supports.
DTYPES = tuple(np.dtype(t) for t in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64"))

# bfloat16 is ml_dtypes' (as JAX's): NumPy sees a dtype of kind "V", so code asking "is this a
# float?" asks is_float, not dtype.kind. Every backend supports it too.
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
ALL_DTYPES = DTYPES + (BFLOAT16,)
# complex64 and complex128, supported beside ALL_DTYPES by every backend (the ops in COMPLEX_OPS).
COMPLEX_DTYPES = (np.dtype(np.complex64), np.dtype(np.complex128))
_KINDS = {"b": "b", "i": "i", "u": "u", "f": "f", "c": "c"}


def kind(dtype: np.dtype) -> str:
    k = _KINDS.get(dtype.kind)
    if k is None and dtype == BFLOAT16:
        return "f"
    return _KINDS[dtype.kind] if k is None else k


def is_float(dtype) -> bool:
    """Whether `dtype` is a real floating type: NumPy's float16/32/64 or bfloat16."""
    return dtype.kind == "f" or dtype == BFLOAT16


def is_complex(dtype) -> bool:
    return np.dtype(dtype).kind == "c"


def real_dtype(dtype) -> np.dtype:
    """The real dtype of a complex one's parts (complex64: float32); a real dtype itself."""
    dtype = np.dtype(dtype)
    return np.dtype({8: np.float32, 16: np.float64}[dtype.itemsize]) if dtype.kind == "c" else dtype
