"""The table of gradient rules, keyed by an expression node's op (the op table's names, and heavy
ops such as "reduce" and "materialize"), and the rules of the elementwise ops.

Design: docs/design/autodiff.md, section "lazytensor/autodiff/rules.py".
"""
from __future__ import annotations

from typing import Callable

from lazytensor.core.expr import Const
from lazytensor.ops.elementwise import cos, floor, log, sign, sin, where
from lazytensor.core.dtypes import is_float

GRADIENTS: dict[str, Callable] = {}

# Ops whose rule takes complex values itself, in PyTorch's convention (autodiff.complex_rules), where
# the others' real rules are wrapped: the rules of functions that are not holomorphic.
TAKES_COMPLEX: set[str] = set()

# Ops whose output is a step function of their float inputs: their gradient is zero almost
# everywhere, and the reverse pass reports it as a place where no gradient flows.
PIECEWISE_CONSTANT = ("floor", "ceil", "sign", "floor_divide")


def gradient_rule(*ops, takes_complex: bool = False):
    def register(rule):
        for op in ops:
            GRADIENTS[op] = rule
            if takes_complex:
                TAKES_COMPLEX.add(op)
        return rule
    return register


def value(arg):
    """An argument as an operand of a new expression: a Const becomes a NumPy scalar of its own
    dtype (the loop dtype it had in the node, so the gradient keeps that dtype and that value)."""
    return arg.dtype.type(arg.value) if isinstance(arg, Const) else arg


def differentiable(dtype) -> bool:
    """Float and complex values carry gradients (complex ones PyTorch's: autodiff.complex_rules)."""
    return is_float(dtype) or dtype.kind == "c"


def _flows(arg) -> bool:
    return not isinstance(arg, Const) and differentiable(arg.dtype)


def wrt(arg, build):
    """build() where a gradient can flow into `arg`, else None (nothing is built for a Const)."""
    return build() if _flows(arg) else None


@gradient_rule("add")
def _add(node, g):
    a, b = node.args
    return wrt(a, lambda: g), wrt(b, lambda: g)


@gradient_rule("subtract")
def _subtract(node, g):
    a, b = node.args
    return wrt(a, lambda: g), wrt(b, lambda: -g)


@gradient_rule("multiply")
def _multiply(node, g):
    a, b = node.args
    return wrt(a, lambda: g * value(b)), wrt(b, lambda: g * value(a))


@gradient_rule("true_divide")
def _divide(node, g):
    a, b = node.args
    return wrt(a, lambda: g / value(b)), wrt(b, lambda: -(g * node) / value(b))     # d(a/b)/db = -(a/b)/b


@gradient_rule("remainder")
def _remainder(node, g):
    a, b = node.args            # a % b = a - b * floor(a / b)
    return wrt(a, lambda: g), wrt(b, lambda: -(g * floor(value(a) / value(b))))


@gradient_rule("power")
def _power(node, g):
    a, b = node.args
    x, y = value(a), value(b)

    def d_base():
        if isinstance(b, Const):
            return g * 0.0 if b.value == 0 else g * y * x ** (y - 1)
        return where(y == 0, 0.0, g * y * x ** (y - 1))

    def d_exponent():
        if isinstance(a, Const):
            return g * node * log(x) if a.value != 0 else where(y >= 0, 0.0, g * node * log(x))
        return where((x == 0) & (y >= 0), 0.0, g * node * log(x))
    return wrt(a, d_base), wrt(b, d_exponent)


@gradient_rule("square")
def _square(node, g):
    (a,) = node.args
    return (wrt(a, lambda: g * (2 * a)),)


@gradient_rule("maximum", "minimum")
def _maximum_minimum(node, g):
    a, b = node.args
    keeps = (lambda x, y: x >= y) if node.op == "maximum" else (lambda x, y: x <= y)
    if isinstance(b, Const) or isinstance(a, Const):        # a scalar bound: torch.clamp's gradient
        return (wrt(a, lambda: where(keeps(a, value(b)), g, 0.0)),
                wrt(b, lambda: where(keeps(b, value(a)), g, 0.0)))
    loses = (lambda x, y: x < y) if node.op == "maximum" else (lambda x, y: x > y)

    def share(x, y):        # torch.maximum: the whole gradient, half of it on a tie, none when beaten
        return where(x == y, g * 0.5, where(loses(x, y), 0.0, g))
    return wrt(a, lambda: share(a, b)), wrt(b, lambda: share(b, a))


@gradient_rule("relu")
def _relu(node, g):
    # relu(a) > 0 exactly where a > 0 (NaN and -0.0 included): the gradient reads the activation, which
    # the forward keeps anyway (the next layer reads it), not the pre-activation, so a plan need not
    # keep that, and relu(a @ w + b) can be one GEMM with its epilogue (lazytensor.plan.heavy.matmul_epilogue).
    (a,) = node.args
    return (wrt(a, lambda: where(node > 0, g, 0.0)),)


@gradient_rule("where")
def _where(node, g):
    c, a, b = node.args
    return None, wrt(a, lambda: where(c, g, 0.0)), wrt(b, lambda: where(c, 0.0, g))


@gradient_rule("astype")
def _astype(node, g):
    (a,) = node.args        # float -> float casts the gradient back; from an integer or bool, none flows
    return (wrt(a, lambda: g.astype(a.dtype)),)


@gradient_rule(*PIECEWISE_CONSTANT)
def _piecewise_constant(node, g):
    return (None,) * len(node.args)


def _unary(*ops):
    """Register a rule `derivative(node, x) * g` for unary ops."""
    def register(derivative):
        def rule(node, g):
            (a,) = node.args
            return (wrt(a, lambda: derivative(node, a, g)),)
        for op in ops:
            GRADIENTS[op] = rule
        return derivative
    return register


_unary("negative")(lambda y, x, g: -g)
_unary("absolute")(lambda y, x, g: g * sign(x))
_unary("exp")(lambda y, x, g: g * y)
_unary("expm1")(lambda y, x, g: g * (y + 1))
_unary("log")(lambda y, x, g: g / x)
_unary("log1p")(lambda y, x, g: g / (x + 1))
_unary("sqrt")(lambda y, x, g: g / (y * 2))
_unary("sin")(lambda y, x, g: g * cos(x))
_unary("cos")(lambda y, x, g: -(g * sin(x)))
_unary("tan")(lambda y, x, g: g * (y * y + 1))
_unary("tanh")(lambda y, x, g: g * (1 - y * y))
_unary("sigmoid")(lambda y, x, g: g * (y * (1 - y)))
