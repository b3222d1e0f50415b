"""Gradient rules of the op table's further float functions (log2 ... logaddexp2), in the table of
lazytensor.autodiff.rules. Where PyTorch defines a gradient for the same function, it is PyTorch's:
rint and trunc are piecewise constant (no gradient), copysign sends sign(x) * sign(result) to x and
none to its sign operand, nextafter passes the gradient to x unchanged (a step of one ulp)."""
from __future__ import annotations

import math

from lazytensor.autodiff.rules import PIECEWISE_CONSTANT, _unary, gradient_rule, value, wrt
from lazytensor.core.expr import apply
from lazytensor.ops.elementwise import sign, sqrt, where

_LN2, _LN10 = math.log(2.0), math.log(10.0)

_unary("log2")(lambda y, x, g: g / (x * _LN2))
_unary("log10")(lambda y, x, g: g / (x * _LN10))
_unary("exp2")(lambda y, x, g: g * (y * _LN2))
_unary("arcsin")(lambda y, x, g: g / sqrt(1 - x * x))
_unary("arccos")(lambda y, x, g: -(g / sqrt(1 - x * x)))
_unary("arctan")(lambda y, x, g: g / (x * x + 1))
_unary("sinh")(lambda y, x, g: g * apply("cosh", x))
_unary("cosh")(lambda y, x, g: g * apply("sinh", x))
_unary("arcsinh")(lambda y, x, g: g / sqrt(x * x + 1))
_unary("arccosh")(lambda y, x, g: g / sqrt(x * x - 1))
_unary("arctanh")(lambda y, x, g: g / (1 - x * x))
_unary("reciprocal")(lambda y, x, g: -(g * (y * y)))
_unary("cbrt")(lambda y, x, g: g / ((y * y) * 3))
_unary("fabs")(lambda y, x, g: g * sign(x))

PIECEWISE_CONSTANT_MORE = ("rint", "trunc")
gradient_rule(*PIECEWISE_CONSTANT_MORE)(lambda node, g: (None,) * len(node.args))


@gradient_rule("arctan2")
def _arctan2(node, g):
    a, b = node.args
    y, x = value(a), value(b)
    return wrt(a, lambda: g * x / (y * y + x * x)), wrt(b, lambda: -(g * y) / (y * y + x * x))


@gradient_rule("hypot")
def _hypot(node, g):
    a, b = node.args
    return wrt(a, lambda: g * value(a) / node), wrt(b, lambda: g * value(b) / node)


@gradient_rule("fmod")
def _fmod(node, g):
    a, b = node.args            # fmod(a, b) = a - b * trunc(a / b)
    return wrt(a, lambda: g), wrt(b, lambda: -(g * apply("trunc", value(a) / value(b))))


@gradient_rule("copysign")
def _copysign(node, g):
    a, b = node.args
    return wrt(a, lambda: where(value(a) == 0, 0.0, g * sign(value(a)) * sign(node))), None


@gradient_rule("nextafter")
def _nextafter(node, g):
    a, b = node.args
    return wrt(a, lambda: g), None


@gradient_rule("logaddexp", "logaddexp2")
def _logaddexp(node, g):
    a, b = node.args
    if node.op == "logaddexp":
        share = lambda x: g * apply("exp", value(x) - node)          # noqa: E731
    else:
        share = lambda x: g * apply("exp2", value(x) - node)         # noqa: E731
    return wrt(a, lambda: share(a)), wrt(b, lambda: share(b))


assert not set(PIECEWISE_CONSTANT) & set(PIECEWISE_CONSTANT_MORE)
