"""Gradients of views: each view step undone on the gradient, in reverse order.

Design: docs/design/autodiff.md, section "lazytensor/autodiff/rules_views.py".
"""
from __future__ import annotations

from lazytensor.autodiff.rules import gradient_rule
from lazytensor.core.expr import Expr
from lazytensor.ops.reductions import reduce
from lazytensor.ops.views import getitem, reshape, transpose


def sum_to(g, shape: tuple):
    """`g` summed over the axes along which `shape` was broadcast to g's shape."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = len(g.shape) - len(shape)
    axes = tuple(i for i, d in enumerate(g.shape)
                 if d != 1 and (i < lead or shape[i - lead] == 1))
    if axes:
        g = reduce("sum", g, axis=axes)
    return reshape(g, shape)


def view_gradient(g, steps, base_shape: tuple):
    """The gradient with respect to a view's base, from `g`, the gradient with respect to the view;
    `steps` are the view's ((step, shape after it), ...) from the base."""
    shapes = [tuple(base_shape)] + [tuple(shape) for _, shape in steps]
    for (step, _), before in zip(reversed(steps), reversed(shapes[:-1])):
        g = _undo(g, step, before)
    return g


def _undo(g, step, before: tuple):
    kind, arg = step
    if kind == "broadcast":
        return sum_to(g, before)
    if kind == "transpose":
        inverse = [0] * len(arg)        # the inverse permutation (np.argsort costs microseconds per call)
        for i, axis in enumerate(arg):
            inverse[axis] = i
        return transpose(g, tuple(inverse))
    if kind == "reshape":
        return reshape(g, before)
    inverse = _inverse_index(arg, before)
    if inverse is not None:
        return getitem(g, inverse)
    return Expr("scatter", (g,), before, g.dtype, g.device, heavy=True, attrs=arg)


def _inverse_index(key: tuple, shape: tuple):
    """The index that undoes basic index `key` on an array of `shape`, when the view it makes holds
    every element once; else None (the gradient must be scattered)."""
    n_axes = sum(1 for k in key if k is not None and k is not Ellipsis)
    items = []
    for k in key:
        if k is Ellipsis:
            items.extend([("slice", None, None, None)] * (len(shape) - n_axes))
        else:
            items.append(k)
    inverse = []
    axis = 0
    for k in items:
        if k is None:
            inverse.append(0)               # the new unit axis goes away
            continue
        n = shape[axis]
        axis += 1
        if isinstance(k, int):
            if n != 1:
                return None
            inverse.append(None)            # the dropped unit axis comes back
            continue
        start, stop, stride = slice(*k[1:]).indices(n)
        if len(range(start, stop, stride)) != n:
            return None
        inverse.append(slice(None) if stride > 0 or n <= 1 else slice(None, None, -1))
    return tuple(inverse)


@gradient_rule("materialize")
def _materialize(node, g):
    step, _why = node.attrs
    (x,) = node.args
    return (view_gradient(g, ((step, tuple(node.shape)),), tuple(x.shape)),)
