"""Operator overloading shared by Tensors and expressions: every operator builds a node.

NumPy's ufunc protocol maps np.exp(t), np.add(a, b), np.maximum(...) to the same nodes, so NumPy
scalars and functions mix with lazytensor operands without computing anything eagerly.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core import upward
from lazytensor.core.rewrites import bool_squared, operator_sqrt


class Operand:
    __slots__ = ()

    def _repr_html_(self) -> str:
        # Jupyter's rich display (lazytensor.tools.display): an expression is planned, never run.
        return upward.display.html(self)

    # -- arithmetic -------------------------------------------------------------------------
    def __pow__(self, o):
        if bool_squared(self, o):
            return _expr.apply("square", self)
        if operator_sqrt(self, o):
            return _expr.unary("sqrt", self)
        return _expr.binary("power", self, o)

    def __neg__(self): return _expr.unary("negative", self)
    def __pos__(self): return self
    def __abs__(self): return _expr.unary("absolute", self)
    def __invert__(self): return _expr.unary("invert", self)
    def __matmul__(self, o): return upward.matmul.matmul(self, o)
    def __rmatmul__(self, o): return upward.matmul.rmatmul(self, o)

    # (the binary operators and the comparisons, elementwise and lazy like NumPy's, are set below:
    # _BINARY_METHODS; __eq__ is one of them, so the hash is stated here: the object's own)
    __hash__ = object.__hash__

    # -- conversions ---------------------------------------------------------------------------
    def astype(self, dtype):
        return _expr.astype(self, dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def eval(self):
        """Evaluate into a new Tensor (lt.evaluate)."""
        return upward.evaluation.evaluate(self)

    def numpy(self) -> np.ndarray:
        """The values as a NumPy array of its own (a host copy, on every device)."""
        return upward.evaluation.to_numpy(self)

    def get(self) -> np.ndarray:
        """CuPy's spelling of a host copy: the same as numpy()."""
        return upward.evaluation.to_numpy(self)

    def __array__(self, dtype=None, copy=None):
        """NumPy's protocol: copy=True always gives memory of its own; copy=None shares the values'
        memory where it is already on the host (a CPU tensor, or an expression's result); copy=False
        does the same but raises where a copy is needed (a CUDA tensor, another dtype)."""
        if copy:
            a = upward.evaluation.to_numpy(self)
        else:
            if copy is False and self.device == "cuda":
                raise ValueError("a CUDA tensor's values reach NumPy only by a copy to the host: "
                                 "call np.asarray(t) or np.array(t) without copy=False, or t.get()")
            a = upward.evaluation.to_numpy_shared(self)
        if dtype is None or a.dtype == dtype:
            return a
        if copy is False:
            raise ValueError(f"a {self.dtype.name} tensor becomes {np.dtype(dtype).name} only by a copy: "
                             f"call np.asarray without copy=False")
        return a.astype(dtype)

    def item(self):
        if self.shape and self.size != 1:      # (a 0-d operand, as a full reduction: no size to count)
            raise ValueError(f"can only convert a tensor of size 1 to a Python scalar, not size {self.size}")
        return upward.evaluation.item(self)

    def __bool__(self):
        if self.size != 1:
            raise ValueError("the truth value of a tensor with more than one element is ambiguous; "
                             "use lt.any() or lt.all()")
        return bool(self.item())

    def __float__(self): return float(self.item())
    def __int__(self): return int(self.item())
    def __complex__(self): return complex(self.item())

    def __index__(self):
        if self.dtype.kind not in "iu" or self.shape != ():     # as NumPy: 0-d integer arrays only
            raise TypeError(f"only 0-d integer tensors can be used as an index, not a {self.dtype.name} tensor "
                            f"of shape {self.shape}")
        return int(self.item())

    # -- the Array API's array attributes (lazytensor.array_api) ------------------------------------
    @property
    def mT(self):
        """The last two axes swapped: a view."""
        return upward.array_api.matrix_transpose(self)

    def to_device(self, device, /, *, stream=None):
        """The values on `device` ('cpu' or 'cuda'): this operand where it already is, else a copy."""
        return self if device == self.device else upward.array_api.asarray(self, device=device)

    # -- NumPy's array methods ----------------------------------------------------------
    def tolist(self):
        """The values as nested Python lists (a host copy)."""
        return self.numpy().tolist()

    def copy(self):
        """A new Tensor with the values (evaluated now, as NumPy's copy)."""
        return upward.evaluation.evaluate(self._fresh())

    def flatten(self):
        """A new Tensor with the values in one dimension (C order), as NumPy's flatten: a copy."""
        return upward.evaluation.evaluate(upward.views.ravel(self._fresh()))

    def _fresh(self):
        """An expression that computes this operand's values (a Tensor evaluates to itself)."""
        return _expr.apply("trunc", self) if self.dtype.kind in "biu" else _expr.apply("add", self, -0.0)

    def cumsum(self, axis=None, dtype=None): return upward.scans.cumsum(self, axis, dtype)
    def cumprod(self, axis=None, dtype=None): return upward.scans.cumprod(self, axis, dtype)
    def nonzero(self): return upward.indexing.nonzero(self)

    def round(self, decimals=0): return upward.ufuncs.round(self, decimals)
    def __round__(self, ndigits=None): return upward.ufuncs.round(self, 0 if ndigits is None else ndigits)
    def clip(self, min=None, max=None): return upward.elementwise.clip(self, min, max)

    def fill(self, value):
        """Set every element to `value` (a tensor's method: an expression has no memory to fill)."""
        if not hasattr(self, "data"):
            raise TypeError("fill writes into a tensor; an expression has no memory: use lt.full_like(e, value)")
        upward.evaluation.assign(self, value)

    @property
    def strides(self) -> tuple:
        """Bytes between elements along each axis: a tensor's own, an expression's once evaluated
        (C order)."""
        data = getattr(self, "data", None)
        if data is not None:
            return tuple(data.strides)
        strides, step = [], self.dtype.itemsize
        for d in reversed(self.shape):
            strides.append(step)
            step *= max(d, 1)
        return tuple(reversed(strides))

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __format__(self, spec):
        """f"{loss:.3f}" formats the value of a one-element tensor, as NumPy's 0-d arrays do."""
        if not spec:
            return str(self)
        if self.size != 1:
            raise TypeError(f"unsupported format string {spec!r} for a tensor of shape {self.shape}: only a "
                            f"tensor of one element formats as a number; format t.tolist() or t.numpy()")
        return format(self.item(), spec)

    # -- views (no copy; see lazytensor.ops.views) -----------------------------------------------------
    def __getitem__(self, key): return upward.views.getitem(self, key)
    @property
    def T(self): return upward.views.transpose(self)
    def transpose(self, *axes):
        return upward.views.transpose(self, axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes)
    def swapaxes(self, axis1, axis2): return upward.views.swapaxes(self, axis1, axis2)
    def reshape(self, *shape): return upward.views.reshape(self, *shape)
    def ravel(self): return upward.views.ravel(self)
    def squeeze(self, axis=None): return upward.views.squeeze(self, axis)

    # -- reductions (each a fused kernel with the expression that feeds it) ----------------------
    def sum(self, axis=None, dtype=None, keepdims=False): return upward.reductions.reduce("sum", self, axis, keepdims, dtype)
    def prod(self, axis=None, dtype=None, keepdims=False): return upward.reductions.reduce("prod", self, axis, keepdims, dtype)
    def mean(self, axis=None, dtype=None, keepdims=False): return upward.reductions.reduce("mean", self, axis, keepdims, dtype)
    def max(self, axis=None, keepdims=False): return upward.reductions.reduce("max", self, axis, keepdims)
    def min(self, axis=None, keepdims=False): return upward.reductions.reduce("min", self, axis, keepdims)
    def any(self, axis=None, keepdims=False): return upward.reductions.reduce("any", self, axis, keepdims)
    def all(self, axis=None, keepdims=False): return upward.reductions.reduce("all", self, axis, keepdims)
    def argmax(self, axis=None, keepdims=False): return upward.reductions.reduce("argmax", self, axis, keepdims)
    def argmin(self, axis=None, keepdims=False): return upward.reductions.reduce("argmin", self, axis, keepdims)
    def var(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return upward.reductions.reduce("var", self, axis, keepdims, dtype, ddof)
    def std(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return upward.reductions.reduce("std", self, axis, keepdims, dtype, ddof)

    # -- NumPy interoperability ------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        return upward.numpy_dispatch.dispatch_ufunc(ufunc, method, inputs, out, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return upward.numpy_dispatch.dispatch_function(func, args, kwargs)

    def __array_namespace__(self, *, api_version=None):
        """The Array API (2024.12) namespace: lazytensor.array_api."""
        if api_version not in (None, "2021.12", "2022.12", "2023.12", "2024.12"):
            raise ValueError(f"lazytensor implements the Array API 2024.12, not {api_version!r}")
        return upward.array_api


# Operators resolve the node builder at call time (it imports this module).
from lazytensor.core import expr as _expr  # noqa: E402

# The binary operators: each method IS the node builder of its op (one Python call per operator
# a user writes, not a method calling a builder), installed once the builder's module exists.
_BINARY_METHODS = (
    ("__add__", "add", False),
    ("__radd__", "add", True),
    ("__sub__", "subtract", False),
    ("__rsub__", "subtract", True),
    ("__mul__", "multiply", False),
    ("__rmul__", "multiply", True),
    ("__truediv__", "true_divide", False),
    ("__rtruediv__", "true_divide", True),
    ("__floordiv__", "floor_divide", False),
    ("__rfloordiv__", "floor_divide", True),
    ("__mod__", "remainder", False),
    ("__rmod__", "remainder", True),
    ("__rpow__", "power", True),
    ("__and__", "bitwise_and", False),
    ("__rand__", "bitwise_and", True),
    ("__or__", "bitwise_or", False),
    ("__ror__", "bitwise_or", True),
    ("__xor__", "bitwise_xor", False),
    ("__rxor__", "bitwise_xor", True),
    ("__lshift__", "left_shift", False),
    ("__rlshift__", "left_shift", True),
    ("__rshift__", "right_shift", False),
    ("__rrshift__", "right_shift", True),
    ("__lt__", "less", False),
    ("__le__", "less_equal", False),
    ("__gt__", "greater", False),
    ("__ge__", "greater_equal", False),
    ("__eq__", "equal", False),
    ("__ne__", "not_equal", False),
)
for _method, _op, _reflected in _BINARY_METHODS:
    setattr(Operand, _method, _expr.operator_function(_op, _reflected))
del _method, _op, _reflected
