"""Gradients through complex values, PyTorch's convention: the gradient of a real loss L with respect
to z = x + iy is dL/dx + i dL/dy (twice dL/d conj(z)), so that a step z - lr * grad descends. By the
chain rule, for w = f(z) with the gradient g of w,

    grad z = conj(g) * dw/d conj(z) + g * conj(dw/dz).

A holomorphic f (dw/d conj(z) = 0: arithmetic, exp, log, the trigonometric functions, sums, matmul,
views) gives g * conj(f'(z)) = conj(f'(z) * conj(g)): the real rule applied to conj(g), conjugated,
so the table's rules serve as they are. The others (conj, real, imag, abs, sign, casts) have their
own rules here; a rule registered with takes_complex (the linalg nodes') computes this convention
itself and is called as it is. A real operand of a complex op takes the real part of its gradient.

Design: docs/design/autodiff.md, section "lazytensor/autodiff/complex_rules.py".
"""
from __future__ import annotations

from lazytensor.autodiff.rules import TAKES_COMPLEX
from lazytensor.core.expr import Const, apply, astype
from lazytensor.ops.elementwise import where


def _complex(x) -> bool:
    return getattr(x, "dtype", None) is not None and x.dtype.kind == "c"


def involves_complex(node) -> bool:
    return _complex(node) or any(_complex(a) for a in node.args if not isinstance(a, Const))


def _conj(x):
    return apply("conjugate", x) if _complex(x) else x


def _as(g, z):
    """g (real) as z's complex dtype."""
    return astype(g, z.dtype) if g.dtype != z.dtype else g


def _conjugate(node, g):
    return (_conj(g),)


def _real(node, g):                 # w = (z + conj z) / 2: grad z = g
    return (_as(g, node.args[0]),)


def _imag(node, g):                 # w = (z - conj z) / 2i: grad z = i g
    return (_as(g, node.args[0]) * 1j,)


def _absolute(node, g):             # w = |z|: grad z = g z / |z|, zero at zero
    (z,) = node.args
    return (where(z == 0, 0j, _as(g, z) * z / _as(node, z)),)


def _sign(node, g):                 # w = z / |z|: grad z = w i imag(g conj(w)) / |z|, zero at zero
    (z,) = node.args
    r = apply("absolute", z)
    return (where(z == 0, 0j, node * (apply("imag", g * _conj(node)) * 1j) / _as(r, z)),)


def _astype(node, g):
    (a,) = node.args        # complex -> real keeps the real part: grad a = g; real -> complex: real(g)
    if _complex(a):
        return (_as(g, a),)
    return (apply("real", g) if _complex(g) else g).astype(a.dtype),


_NOT_HOLOMORPHIC = {"conjugate": _conjugate, "real": _real, "imag": _imag, "absolute": _absolute,
                    "sign": _sign, "astype": _astype}


def complex_gradients(node, g, rule) -> tuple:
    """The gradients of node's arguments (None where none flows) when a complex value is involved:
    its own rule for an op that is not holomorphic, the table's rule where it takes complex values,
    else the conjugated real rule of conj(g)."""
    own = _NOT_HOLOMORPHIC.get(node.op)
    if own is not None:
        ds = own(node, g)
    elif rule is None:
        return None
    elif node.op in TAKES_COMPLEX:
        ds = rule(node, g)
    else:
        ds = tuple(_conj(d) if d is not None else None for d in rule(node, _conj(g)))
    return tuple(apply("real", d) if d is not None and _complex(d) and not isinstance(a, Const) and not _complex(a)
                 else d for a, d in zip(node.args, ds))
