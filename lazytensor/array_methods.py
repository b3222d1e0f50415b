"""The user methods and operators of Tensors and expressions, set on their classes by install().

Tensors and expressions are what users hold, so their methods are the user API: `t.sum()`, `t.T`,
`a + b`, `np.exp(t)`, `y[...] = e`, `np.asarray(e)`, Jupyter's `_repr_html_`. They build nodes
through lazytensor.ops, evaluate through lazytensor.assign or display through lazytensor.tools,
which all import the IR (lazytensor.core); so the IR's classes do not define them, this module
does, as plain functions, and lazytensor/__init__.py installs them once everything is imported.
Editors see them in the stubs lazytensor/core/operand.pyi and tensor.pyi.
"""
from __future__ import annotations

import sys

import numpy as np

from lazytensor.assign import own_memory
from lazytensor.assign.direct import c_setitem
from lazytensor.assign.own_memory import memory_for_writes
from lazytensor.assign.small_io import inplace_scalar, write_scalar, written_back
from lazytensor.assign.evaluate import (assign as _assign, evaluate, item as _item, result_of, to_numpy,
                                        to_numpy_shared)
from lazytensor.core.expr import Expr, apply, astype as _node_astype, binary, operator_function, unary
from lazytensor.core.operand import Operand
from lazytensor.core.rewrites import bool_squared, operator_sqrt
from lazytensor.core.tensor import Tensor, asarray
from lazytensor.core.view_steps import int_view
from lazytensor.ops import complex_parts, elementwise, indexing, matmul, reductions, scans, ufuncs, views


# -- arithmetic -------------------------------------------------------------------------------------
def power(self, o):
    if bool_squared(self, o):
        return apply("square", self)
    if operator_sqrt(self, o):
        return unary("sqrt", self)
    return binary("power", self, o)


def negative(self): return unary("negative", self)
def positive(self): return self
def absolute(self): return unary("absolute", self)
def invert(self): return unary("invert", self)
def matrix_product(self, o): return matmul.matmul(self, o)
def reflected_matrix_product(self, o): return matmul.rmatmul(self, o)


# The binary operators and the comparisons, elementwise and lazy like NumPy's: each method IS the
# node builder of its op (lazytensor.core.expr.operator_function), one Python call per operator a
# user writes, not a method calling a builder. (method, op, reflected)
BINARY_OPERATORS = (
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


# -- conversions ------------------------------------------------------------------------------------
def astype(self, dtype):
    return _node_astype(self, dtype)


def eval_(self):
    """Evaluate into a new Tensor (lt.evaluate)."""
    return evaluate(self)


def numpy(self) -> np.ndarray:
    """The values as a NumPy array of its own (a host copy, on every device)."""
    return to_numpy(self)


def get(self) -> np.ndarray:
    """CuPy's spelling of a host copy: the same as numpy()."""
    return to_numpy(self)


def array(self, dtype=None, copy=None):
    """NumPy's protocol: copy=True always gives memory of its own; copy=None shares the values'
    memory where it is already on the host (a CPU tensor, or an expression's result); copy=False
    does the same but raises where a copy is needed (a CUDA tensor, another dtype)."""
    if copy:
        a = to_numpy(self)
    else:
        if copy is False and self.device == "cuda":
            raise ValueError("a CUDA tensor's values reach NumPy only by a copy to the host: "
                             "call np.asarray(t) or np.array(t) without copy=False, or t.get()")
        a = to_numpy_shared(self)
    if dtype is None or a.dtype == dtype:
        return a
    if copy is False:
        raise ValueError(f"a {self.dtype.name} tensor becomes {np.dtype(dtype).name} only by a copy: "
                         f"call np.asarray without copy=False")
    return a.astype(dtype)


def item(self):
    if type(self) is Tensor and not self.shape and self.device == "cpu":
        return self.data.item()             # (`t[3].item()`, `float(t[3])`: a 0-d view's element)
    if self.shape and self.size != 1:      # (a 0-d operand, as a full reduction: no size to count)
        raise ValueError(f"can only convert a tensor of size 1 to a Python scalar, not size {self.size}")
    return _item(self)


def truth(self):
    if self.size != 1:
        raise ValueError("the truth value of a tensor with more than one element is ambiguous; "
                         "use lt.any() or lt.all()")
    return bool(self.item())


def to_float(self):
    if type(self) is Tensor and not self.shape and self.device == "cpu":
        return float(self.data.item())
    return float(self.item())


def to_int(self):
    if type(self) is Tensor and not self.shape and self.device == "cpu":
        return int(self.data.item())
    return int(self.item())
def to_complex(self): return complex(self.item())


def index(self):
    if self.dtype.kind not in "iu" or self.shape != ():     # as NumPy: 0-d integer arrays only
        raise TypeError(f"only 0-d integer tensors can be used as an index, not a {self.dtype.name} tensor "
                        f"of shape {self.shape}")
    return int(self.item())


def format_value(self, spec):
    """f"{loss:.3f}" formats the value of a one-element tensor, as NumPy's 0-d arrays do."""
    if not spec:
        return str(self)
    if self.size != 1:
        raise TypeError(f"unsupported format string {spec!r} for a tensor of shape {self.shape}: only a "
                        f"tensor of one element formats as a number; format t.tolist() or t.numpy()")
    return format(self.item(), spec)


def html(self) -> str:
    # Jupyter's rich display (lazytensor.tools.display): an expression is planned, never run.
    from lazytensor.tools import display
    return display.html(self)


# -- the Array API's array attributes (lazytensor.array_api) ------------------------------------------
def mT(self):  # noqa: N802  (the standard's name)
    """The last two axes swapped: a view."""
    from lazytensor import array_api
    return array_api.matrix_transpose(self)


def to_device(self, device, /, *, stream=None):
    """The values on `device` ('cpu' or 'cuda'): this operand where it already is, else a copy."""
    if device == self.device:
        return self
    from lazytensor import array_api
    return array_api.asarray(self, device=device)


def dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """The DLPack capsule of the values (an expression is evaluated once and shares its result),
    with the standard's keywords passed on to NumPy's or CuPy's array (those left None are not)."""
    keywords = {k: v for k, v in (("stream", stream), ("max_version", max_version),
                                  ("dl_device", dl_device), ("copy", copy)) if v is not None}
    return result_of(self).data.__dlpack__(**keywords)


def dlpack_device(self):
    """(DLPack device type, device id), known without evaluating: kDLCPU is 1, kDLCUDA 2."""
    if type(self) is Tensor:
        return self.data.__dlpack_device__()
    if self.result is not None:
        return self.result.data.__dlpack_device__()
    if self.device == "cuda":
        import cupy
        return (2, cupy.cuda.Device().id)
    return (1, 0)


def array_namespace(self, *, api_version=None):
    """The Array API (2025.12) namespace: lazytensor.array_api."""
    if api_version not in (None, "2021.12", "2022.12", "2023.12", "2024.12", "2025.12"):
        raise ValueError(f"lazytensor implements the Array API 2025.12, not {api_version!r}")
    from lazytensor import array_api
    return array_api


# -- NumPy's array methods --------------------------------------------------------------------------
def tolist(self):
    """The values as nested Python lists (a host copy)."""
    return self.numpy().tolist()


def copy(self):
    """A new Tensor with the values (evaluated now, as NumPy's copy)."""
    return evaluate(_fresh(self))


def flatten(self):
    """A new Tensor with the values in one dimension (C order), as NumPy's flatten: a copy."""
    return evaluate(views.ravel(_fresh(self)))


def _fresh(x):
    """An expression that computes this operand's values (a Tensor evaluates to itself)."""
    return apply("trunc", x) if x.dtype.kind in "biu" else apply("add", x, -0.0)


def real_part(self): return complex_parts.real(self)
def imag_part(self): return complex_parts.imag(self)
def conj(self): return complex_parts.conj(self)


def cumsum(self, axis=None, dtype=None): return scans.cumsum(self, axis, dtype)
def cumprod(self, axis=None, dtype=None): return scans.cumprod(self, axis, dtype)
def nonzero(self): return indexing.nonzero(self)
def round_values(self, decimals=0): return ufuncs.round(self, decimals)
def python_round(self, ndigits=None): return ufuncs.round(self, 0 if ndigits is None else ndigits)
def clip(self, min=None, max=None): return elementwise.clip(self, min, max)  # noqa: A002  (NumPy's names)


def fill(self, value):
    """Set every element to `value` (an expression's first write gives it memory of its own)."""
    if type(self) is not Tensor:
        holders = sys.getrefcount(self) - own_memory.METHOD_REFS
        self = memory_for_writes(self, holders)
    _assign(self, value)


# -- views (no copy; see lazytensor.ops.views) ----------------------------------------------------------
def getitem(self, key):
    if type(self) is Tensor:
        v = int_view(self, key)
        if v is not None:
            return v
    return views.getitem(self, key)
def T(self): return views.transpose(self)  # noqa: N802  (NumPy's name)


def transpose(self, *axes):
    return views.transpose(self, axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes)


def swapaxes(self, axis1, axis2): return views.swapaxes(self, axis1, axis2)
def reshape(self, *shape): return views.reshape(self, *shape)
def ravel(self): return views.ravel(self)
def squeeze(self, axis=None): return views.squeeze(self, axis)


# -- reductions (each a fused kernel with the expression that feeds it) ----------------------------------
_reduce = reductions.reduce


def sum_(self, axis=None, dtype=None, keepdims=False): return _reduce("sum", self, axis, keepdims, dtype)
def prod(self, axis=None, dtype=None, keepdims=False): return _reduce("prod", self, axis, keepdims, dtype)
def mean(self, axis=None, dtype=None, keepdims=False): return _reduce("mean", self, axis, keepdims, dtype)
def max_(self, axis=None, keepdims=False): return _reduce("max", self, axis, keepdims)
def min_(self, axis=None, keepdims=False): return _reduce("min", self, axis, keepdims)
def any_(self, axis=None, keepdims=False): return _reduce("any", self, axis, keepdims)
def all_(self, axis=None, keepdims=False): return _reduce("all", self, axis, keepdims)
def argmax(self, axis=None, keepdims=False): return _reduce("argmax", self, axis, keepdims)
def argmin(self, axis=None, keepdims=False): return _reduce("argmin", self, axis, keepdims)
def var(self, axis=None, dtype=None, ddof=0, keepdims=False): return _reduce("var", self, axis, keepdims, dtype, ddof)
def std(self, axis=None, dtype=None, ddof=0, keepdims=False): return _reduce("std", self, axis, keepdims, dtype, ddof)


# -- NumPy interoperability ---------------------------------------------------------------------------
def array_ufunc(self, ufunc, method, *inputs, out=None, **kwargs):
    from lazytensor.ops import numpy_dispatch
    return numpy_dispatch.dispatch_ufunc(ufunc, method, inputs, out, kwargs)


def array_function(self, func, types, args, kwargs):
    from lazytensor.ops import numpy_dispatch
    return numpy_dispatch.dispatch_function(func, args, kwargs)


# -- writing a Tensor --------------------------------------------------------------------------------
def setitem(self, key, value):
    tv = type(value)
    if tv is Tensor:
        if written_back(self, key, value):
            return                                      # `t[3] += 1`: the item view written onto itself
    elif tv is not Expr and write_scalar(self, key, value):
        return                                          # a scalar into a CPU tensor nothing reads
    if key is not Ellipsis and indexing.is_advanced(key):
        return indexing.setitem(self, key, value)      # a mask or index array: a scatter
    dest = self if key is Ellipsis else self[key]
    _assign(dest, value)


def assign(self, value) -> Tensor:
    _assign(self, value)
    return self


def _inplace(self, op, other):
    if type(self) is Tensor and inplace_scalar(self, op, other):
        return self                                     # `t[3] += 1`: a 0-d CPU tensor nothing reads
    # An operand nothing else holds (the temporary `b * a` of `a += b * a`) is part of the value
    # being written: the write need not evaluate it first, though it reads `a` (assign.writes).
    private = (other,) if sys.getrefcount(other) <= _OPERAND_CALL_REFS and isinstance(other, Operand) else ()
    _assign(self, apply(op, self, other), what="apply an in-place op from", private=private, held=False)
    return self


def iadd(self, o): return _inplace(self, "add", o)
def isub(self, o): return _inplace(self, "subtract", o)
def imul(self, o): return _inplace(self, "multiply", o)
def itruediv(self, o): return _inplace(self, "true_divide", o)
def ifloordiv(self, o): return _inplace(self, "floor_divide", o)
def imod(self, o): return _inplace(self, "remainder", o)
def ipow(self, o): return _inplace(self, "power", o)
def iand(self, o): return _inplace(self, "bitwise_and", o)
def ior(self, o): return _inplace(self, "bitwise_or", o)
def ixor(self, o): return _inplace(self, "bitwise_xor", o)
def ilshift(self, o): return _inplace(self, "left_shift", o)
def irshift(self, o): return _inplace(self, "right_shift", o)


# -- writing an expression: into memory of its own, made on the first write (assign.own_memory) --------
# Each counts the references to the expression beyond its own call's (own_memory.ITEM_REFS, ...):
# with only the user's name, no expression built on it can be alive to keep its old value.
def expr_setitem(self, key, value):
    holders = sys.getrefcount(self) - own_memory.ITEM_REFS
    setitem(memory_for_writes(self, holders, (*(key if type(key) is tuple else (key,)), value)), key, value)


def expr_assign(self, value):
    holders = sys.getrefcount(self) - own_memory.METHOD_REFS
    _assign(memory_for_writes(self, holders, (value,)), value)
    return self


def _expr_inplace(op):
    def inplace(self, o):
        holders = sys.getrefcount(self) - own_memory.INPLACE_REFS
        if holders <= 0 and not own_memory.owns_memory(self):
            # Only the statement holds it (the `y[k]` of `y[k] += v`): no name can see the write,
            # so the updated value is an expression, and `y[k] = y[k] + v` stays one scatter kernel.
            return own_memory.updated_value(self, apply(op, self, o))
        _inplace(memory_for_writes(self, holders, (o,)), op, o)
        return self
    inplace.__name__ = f"expr_inplace_{op}"
    return inplace


class _CallShape:
    """The call path of an in-place operator (`t += x` -> iadd -> _inplace), to count the
    references that path itself holds to a temporary right operand: the interpreter's stack,
    each frame's parameter and getrefcount's argument."""
    def __iadd__(self, o): return _count_refs(self, "add", o)


def _count_refs(self, op, other):
    self.count = sys.getrefcount(other)
    return self


def _operand_call_refs() -> int:
    probe = _CallShape()
    probe += object()
    return probe.count


_OPERAND_CALL_REFS = _operand_call_refs()


# -- reading a Tensor ------------------------------------------------------------------------------
def tensor_copy(self) -> Tensor:
    return evaluate(self)      # new memory, as copy.copy of a NumPy array


def tensor_deepcopy(self, memo) -> Tensor:
    return evaluate(self)


def reduce_operand(self):
    """pickle: an operand pickles as its values (an expression is evaluated first), as host memory
    with its device; it unpickles as a Tensor on that device. (Pickle protocol 5 sends a CPU
    tensor's memory out of band, without a copy.)"""
    t = result_of(self)
    return unpickle, (t.data if t.device == "cpu" else t.backend.to_host(t.data), t.device)


def unpickle(host, device) -> Tensor:
    return Tensor(host, "cpu") if device == "cpu" else asarray(host, device=device)


def sizeof(self) -> int:
    """sys.getsizeof (what Dask's memory accounting reads): the bytes an operand keeps alive, a
    Tensor's values or, for an expression not evaluated yet, the tensors it reads."""
    t = self.result if type(self) is Expr else self
    if t is not None:
        return object.__sizeof__(self) + t.nbytes
    return object.__sizeof__(self) + sum({id(x): x.nbytes for x in self.leaves}.values())


def tensor_repr(self):
    body = np.array2string(to_numpy_shared(self), separator=", ", prefix="Tensor(", threshold=200)
    return f"Tensor({body}, dtype={self.dtype.name}, device={self.device!r})"


# -- the tables install() sets: method name -> function ----------------------------------------------
OPERAND_METHODS = {
    "_repr_html_": html,
    "__pow__": power, "__neg__": negative, "__pos__": positive, "__abs__": absolute, "__invert__": invert,
    "__matmul__": matrix_product, "__rmatmul__": reflected_matrix_product,
    "astype": astype, "eval": eval_, "numpy": numpy, "get": get, "__array__": array, "item": item,
    "__bool__": truth, "__float__": to_float, "__int__": to_int, "__complex__": to_complex, "__index__": index,
    "__format__": format_value,
    "mT": property(mT), "to_device": to_device, "__array_namespace__": array_namespace,
    "__dlpack__": dlpack, "__dlpack_device__": dlpack_device,
    "tolist": tolist, "copy": copy, "flatten": flatten, "cumsum": cumsum, "cumprod": cumprod,
    "nonzero": nonzero, "round": round_values, "__round__": python_round, "clip": clip, "fill": fill,
    "__getitem__": getitem, "T": property(T), "transpose": transpose, "swapaxes": swapaxes,
    "reshape": reshape, "ravel": ravel, "squeeze": squeeze,
    "sum": sum_, "prod": prod, "mean": mean, "max": max_, "min": min_, "any": any_, "all": all_,
    "argmax": argmax, "argmin": argmin, "var": var, "std": std,
    "real": property(real_part), "imag": property(imag_part), "conj": conj, "conjugate": conj,
    "__array_ufunc__": array_ufunc, "__array_function__": array_function,
    "__reduce__": reduce_operand, "__sizeof__": sizeof,
    "__array_priority__": 20.0,     # (what Dask's tensordot reads to pick the chunks' array library)
}

TENSOR_METHODS = {
    "__setitem__": c_setitem(setitem), "assign": assign,
    "__iadd__": iadd, "__isub__": isub, "__imul__": imul, "__itruediv__": itruediv,
    "__ifloordiv__": ifloordiv, "__imod__": imod, "__ipow__": ipow, "__iand__": iand, "__ior__": ior,
    "__ixor__": ixor, "__ilshift__": ilshift, "__irshift__": irshift,
    "__copy__": tensor_copy, "__deepcopy__": tensor_deepcopy, "__repr__": tensor_repr,
}


def expr_copy(self, memo=None):
    """copy.copy and copy.deepcopy: another object with the values of now (an expression can be
    written, so it is not its own copy): lazy, kept by a later write like any node built on it."""
    return _fresh(self)


EXPR_METHODS = {
    "__setitem__": expr_setitem, "assign": expr_assign, "__copy__": expr_copy, "__deepcopy__": expr_copy,
    **{name: _expr_inplace(op) for name, op in (
        ("__iadd__", "add"), ("__isub__", "subtract"), ("__imul__", "multiply"),
        ("__itruediv__", "true_divide"), ("__ifloordiv__", "floor_divide"), ("__imod__", "remainder"),
        ("__ipow__", "power"), ("__iand__", "bitwise_and"), ("__ior__", "bitwise_or"),
        ("__ixor__", "bitwise_xor"), ("__ilshift__", "left_shift"), ("__irshift__", "right_shift"))},
}


def installed() -> dict:
    """class -> the names install() sets on it."""
    return {Operand: [*OPERAND_METHODS, *(m for m, _, _ in BINARY_OPERATORS)], Tensor: [*TENSOR_METHODS],
            Expr: [*EXPR_METHODS]}


def install() -> None:
    """Set the user methods and operators on Operand (so on Tensor and Expr) and on Tensor."""
    for name, f in OPERAND_METHODS.items():
        setattr(Operand, name, f)
    for name, op, reflected in BINARY_OPERATORS:
        setattr(Operand, name, operator_function(op, reflected))
    for name, f in TENSOR_METHODS.items():
        setattr(Tensor, name, f)
    for name, f in EXPR_METHODS.items():
        setattr(Expr, name, f)
