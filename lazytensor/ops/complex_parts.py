"""The parts of complex values, as NumPy spells them: real, imag, conj (conjugate), angle. On a real
operand they mean what NumPy's do: real(x) is x, imag(x) zeros of x's dtype, conj(x) x's values,
angle(x) 0 or pi."""
from __future__ import annotations

import math

import numpy as np

from lazytensor.core.expr import apply
from lazytensor.core import tensor as _tensor


def _node(x):
    return x if hasattr(x, "dtype") and hasattr(x, "shape") and not isinstance(x, np.ndarray) else _tensor.asarray(x)


def real(x):
    """The real part (np.real): of a complex array, its real dtype; a real array itself."""
    x = _node(x)
    return apply("real", x) if x.dtype.kind == "c" else x


def imag(x):
    """The imaginary part (np.imag): of a complex array, its real dtype; zeros of a real one's dtype."""
    x = _node(x)
    if x.dtype.kind == "c":
        return apply("imag", x)
    return _tensor.zeros_like(x)


def conj(x):
    """The complex conjugate (np.conj, np.conjugate); a real array's values."""
    return apply("conjugate", _node(x))


conjugate = conj


def angle(z, deg=False):
    """The counterclockwise angle from the positive real axis (np.angle): arctan2(imag, real), in
    radians or, with deg=True, degrees; 0 or pi for a real z (float64 for integers, as NumPy)."""
    z = _node(z)
    if z.dtype.kind == "c":
        a = apply("arctan2", apply("imag", z), apply("real", z))
    else:
        a = apply("arctan2", 0, z)
    return apply("multiply", a, 180 / math.pi) if deg else a
