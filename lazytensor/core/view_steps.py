"""View steps: basic indexing, transposes, reshapes and broadcasts of tensors and of expressions.

A view of a Tensor is a strided view of its memory (no copy). A view of an elementwise expression
is pushed down to the expression's leaves: `(a + b)[::2]` becomes `a[::2] + b[::2]`, so the view
costs nothing but index arithmetic in the consumer's kernel and nothing is materialized. Operands
that broadcast are first viewed at the expression's full shape (stride 0), then the view applies.

Two cases cannot be pure index remapping, and become a "materialize" node that the planner
evaluates into a temporary (lt.explain says so): a view of a reduction's result (the reduction
must run first), and a reshape that no strided view can express (e.g. of a transposed operand).
"""
from __future__ import annotations

import functools

import numpy as np

from lazytensor.core.expr import Const, Expr
from lazytensor.core.readers import memory_of
from lazytensor.core.tensor import Tensor, as_node


class NoViewPossible(Exception):
    """A reshape that needs a copy."""


# -- view steps: hashable descriptions, applied to device arrays --------------------------------

def _array_module(a):
    return np if isinstance(a, np.ndarray) else __import__("cupy")


def canonical_key(key) -> tuple:
    items = key if isinstance(key, tuple) else (key,)
    out = []
    for k in items:
        if isinstance(k, slice):
            out.append(("slice", _int_or_none(k.start), _int_or_none(k.stop), _int_or_none(k.step)))
        elif k is None or k is Ellipsis:
            out.append(k)
        elif isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            out.append(int(k))
        else:
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and integer or boolean "
                             f"arrays or tensors are valid indices, got {type(k).__name__}; to keep the shape "
                             f"while choosing elements, use lt.where(mask, x, fill)")
    if Ellipsis not in out:
        out.append(Ellipsis)          # keeps NumPy returning a (0-d) view rather than a scalar
    return tuple(out)


def _int_or_none(v):
    return None if v is None else int(v)


def _index_of(canonical: tuple) -> tuple:
    return tuple(slice(*k[1:]) if isinstance(k, tuple) else k for k in canonical)


def apply_step(a, step):
    kind, arg = step
    if kind == "index":
        return a[_index_of(arg)]
    if kind == "transpose":
        return a.transpose(arg)
    if kind == "broadcast":
        return _array_module(a).broadcast_to(a, arg)
    if kind == "reshape":
        strides = nocopy_strides(a.shape, a.strides, arg, a.itemsize)
        if strides is None:
            raise NoViewPossible
        return _array_module(a).lib.stride_tricks.as_strided(a, arg, strides)
    raise ValueError(kind)


_probe = np.empty(1, np.bool_)


def shape_after(shape: tuple, step) -> tuple:
    """The shape a view step gives, computed without data (errors as NumPy words them)."""
    kind, arg = step
    if kind == "index":
        return _indexed_shape(tuple(shape), arg)
    if kind == "transpose":
        return tuple(shape[i] for i in arg)
    return tuple(arg)


@functools.lru_cache(maxsize=4096)
def _indexed_shape(shape: tuple, canonical: tuple) -> tuple:
    """Remembered: NumPy's indexing of a zero-stride ghost costs microseconds, and a training loop
    takes the same views (dgamma = sums[:, 1]) on every call. An error is raised, never remembered."""
    ghost = np.lib.stride_tricks.as_strided(_probe, shape, (0,) * len(shape))
    return ghost[_index_of(canonical)].shape


def nocopy_strides(shape, strides, newshape, itemsize):
    """Strides that view (shape, strides) as newshape without a copy, or None (NumPy's algorithm)."""
    size = 1
    for d in shape:
        size *= d
    if size == 0 or size == 1:
        out, acc = [], itemsize
        for d in reversed(newshape):
            out.append(acc)
            acc *= max(d, 1)
        return tuple(reversed(out))
    old = [(d, s) for d, s in zip(shape, strides) if d != 1]
    new = list(newshape)
    new_strides = [0] * len(new)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(new) and oi < len(old):
        np_, op_ = new[ni], old[oi][0]
        while np_ != op_:
            if np_ < op_:
                np_ *= new[nj]
                nj += 1
            else:
                op_ *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        new_strides[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            new_strides[k - 1] = new_strides[k] * new[k]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    last = new_strides[ni - 1] if ni >= 1 else itemsize
    for k in range(ni, len(new)):
        new_strides[k] = last
    return tuple(new_strides)


# -- pushing a view down an expression ---------------------------------------------------------

def view(x, step):
    """x viewed through `step`; x is a Tensor, an expression or a NumPy array."""
    x = as_node(x)
    if type(x) is Expr and x.result is not None:
        x = x.result                # an evaluated node is its result
    new_shape = shape_after(tuple(x.shape), step)
    if isinstance(x, Tensor):
        try:
            out = Tensor(apply_step(x.data, step), x.device)
        except NoViewPossible:
            return _materialize(x, step, new_shape, "the tensor's strides do not allow this reshape as a view")
        out.view_of = (x, ((step, new_shape),))     # provenance: the reverse pass routes gradients to x
        return out
    if x.heavy:
        return _materialize(x, step, new_shape, "a view of a reduction's result reads the reduction's output")
    try:
        return _push(x, ((step, new_shape),), {})
    except NoViewPossible:
        return _materialize(x, step, new_shape, "an operand's strides do not allow this reshape as a view")


def tensor_view(base, steps) -> Tensor:
    """The Tensor `base` viewed through `steps` ((view step, shape after it), ...), its provenance kept."""
    data = base.data
    for step, _ in steps:
        data = apply_step(data, step)
    out = Tensor(data, base.device)
    out.view_of = (base, steps)
    return out


def _materialize(x, step, shape, why):
    return Expr("materialize", (x,), shape, x.dtype, x.device, heavy=True, attrs=(step, why))


def _push(node, steps, memo):
    """Rebuild `node` with `steps` (each (step, resulting shape)) applied at its leaves; `memo`
    keeps a node shared below the view shared above it."""
    key = (id(node), steps)
    hit = memo.get(key)
    if hit is not None:
        return hit
    if isinstance(node, Const):
        return node
    if type(node) is Expr and node.result is not None:
        node = node.result          # evaluated since the view's root was built: its operands are gone
    if isinstance(node, Tensor):
        out = tensor_view(node, steps)
    else:
        args = []
        for a in node.args:
            if isinstance(a, Const):
                args.append(a)
                continue
            a_steps = steps if a.shape == node.shape else ((("broadcast", node.shape), node.shape),) + steps
            args.append(_push(a, a_steps, memo))
        out = Expr(node.op, tuple(args), steps[-1][1], node.dtype, node.device, False, node.attrs)
    memo[key] = out
    return out


_new = object.__new__


def int_view(x, key):
    """x[key] for a Tensor x and an int or tuple-of-ints key, as view(x, ("index", canonical_key(key)))
    makes it, without its general steps (`float(t[3])`, `t[i, j]` in a loop); None where the key is
    anything else, or x is not on the CPU. The view shares x's memory, so it shares x's record of readers too."""
    if x.device != "cpu":
        return None
    tk = type(key)
    if tk is int:
        canonical = (key, Ellipsis)
    elif tk is tuple and all(type(k) is int for k in key):
        canonical = (*key, Ellipsis)
    else:
        return None
    data = x.data[canonical]
    out = _new(Tensor)
    out.data = data
    out.device = x.device
    out.shape = shape = data.shape
    out.dtype = x.dtype
    out.skey = x.skey           # (a Tensor's structure id is its dtype's load)
    out.layout = out.flat = None
    m = x.memory
    out.memory = m if m is not None else memory_of(x)
    out.view_of = (x, ((("index", canonical), shape),))
    return out
