"""lt.grad: the reverse pass. Expression DAG in, expression DAG out; nothing is computed.

Design: docs/design/autodiff.md, section "lazytensor/autodiff/reverse.py".
"""
from __future__ import annotations

import weakref

import numpy as np

from lazytensor.autodiff import templates
from lazytensor.autodiff.complex_rules import complex_gradients, involves_complex
from lazytensor.autodiff.origin import as_computed
from lazytensor.autodiff.patterns import declined, matching_pattern
from lazytensor.autodiff.rules import GRADIENTS, PIECEWISE_CONSTANT, differentiable
from lazytensor.autodiff.rules_views import sum_to, view_gradient
from lazytensor.core.expr import Const, Expr, astype
from lazytensor.core.operand import Operand
from lazytensor.core.tensor import Tensor, as_node, asarray
from lazytensor.ops.views import broadcast_to
from lazytensor.core.dtypes import is_float


class Gradients(tuple):
    """The gradients lt.grad returns, one lazy expression per input, and what the reverse pass
    decided on the way:
      stops: (node, argument index, why) for each place where a gradient path to an input ends at
             an op without a gradient;
      untouched: the tensors the output reads that are neither inputs nor views of one: nothing
             was built for them;
      paths: (node, what) for each root a backward pattern took (the fused CBR backward: which
             form, where stage 1 reads the forward's saved results, whether dgrad is planned) and
             each node the per-op rules took where a pattern says why it did not;
      from_template: True when the gradient DAG was rebuilt from the template of a structure seen
             before (lazytensor.autodiff.templates), without running the rules.
    stops and paths hold their nodes weakly (None once nothing else holds one): the forward's nodes are not
    kept by the Gradients (a caller holding them while the step writes the parameters would make
    every such node a live reader of the parameters, computed into memory of its own)."""
    untouched: tuple
    from_template = False

    @property
    def stops(self) -> tuple:
        return _alive(self._stops)

    @stops.setter
    def stops(self, entries) -> None:
        self._stops = _weakly(entries)

    @property
    def paths(self) -> tuple:
        return _alive(self._paths)

    @paths.setter
    def paths(self, entries) -> None:
        self._paths = _weakly(entries)


def _weakly(entries) -> tuple:
    return tuple((weakref.ref(node), *rest) for node, *rest in entries)


def _alive(entries) -> tuple:
    return tuple((ref(), *rest) for ref, *rest in entries)


def grad(output, inputs, grad_output=None):
    """The gradient of `output` with respect to each tensor of `inputs`, as lazy expressions.

    output: a float expression (or Tensor); a scalar (size 1) unless grad_output is given.
    inputs: a Tensor, or a sequence of Tensors (float): a single Tensor gives a single expression,
            a sequence gives a Gradients tuple in the same order.
    grad_output: the gradient flowing into `output` (its shape), for a vector-Jacobian product.
    Nothing runs until a gradient is evaluated or assigned: `w[...] -= lr * g` is one kernel with
    the backward ops that compute g.
    """
    try:
        return _grad(output, inputs, grad_output)
    finally:
        _standins.clear()


def _grad(output, inputs, grad_output):
    single = isinstance(inputs, Tensor)
    inputs = _check_inputs((inputs,) if single else inputs)
    output = _check_output(output)
    order = _postorder(output)
    key = templates.forward_key(order, inputs) if grad_output is None else None
    if key is not None:
        template = templates.lookup(key)
        if template is not None:
            result = template.instantiate(order, Gradients)
            return result[0] if single else result
    seed = _seed(output, grad_output)
    targets = {id(x) for x in inputs}
    reaches = {}
    for node in order:
        reaches[id(node)] = id(node) in targets or any(reaches[id(c)] for c in _operands(node))
    for i, x in enumerate(inputs):
        if not reaches.get(id(x), False):
            raise ValueError(f"lt.grad: the output does not read inputs[{i}] (a {x.dtype.name} Tensor of shape "
                             f"{x.shape}), so it has no gradient with respect to it; leave it out of inputs "
                             f"(for a zero gradient use lt.zeros_like)")
    pending = {id(output): [seed]}
    found = {}
    stops = []
    paths = []
    for node in reversed(order):
        contributions = pending.pop(id(node), None)
        if contributions is None:
            continue
        g = _total(contributions, node)
        if id(node) in targets:
            found[id(node)] = g
        if isinstance(node, Tensor):
            if node.view_of is not None and reaches[id(node.view_of[0])]:
                base, steps = node.view_of
                pending.setdefault(id(base), []).append(view_gradient(g, steps, base.shape))
            continue
        node = computed(node)
        pattern = matching_pattern(node)
        if pattern is not None:
            # A whole subgraph at once (the fused CBR backward): its inputs get their gradients,
            # the nodes it consumed get none from this root.
            wanted = [n for n in _pattern_operands(node) if reaches[id(n)]]
            paths.append((node, pattern.describe(node, g, wanted)))
            for operand, d in pattern.gradients(node, g, wanted=wanted).items():
                if d is not None and reaches.get(id(operand), False):
                    pending.setdefault(id(operand), []).append(d)
            continue
        why = declined(node)
        if why is not None:
            paths.append((node, why))
        rule = GRADIENTS.get(node.op)
        ds = complex_gradients(node, g, rule) if involves_complex(node) else rule(node, g) if rule else None
        if ds is None:
            raise NotImplementedError(f"lt.grad: no gradient rule for the op {node.op!r}, which lies between the "
                                      f"output and an input")
        for i, (arg, d) in enumerate(zip(node.args, ds)):
            if isinstance(arg, Const) or not reaches[id(arg)]:
                continue
            if d is None or not differentiable(arg.dtype):
                stops.append((node, i, _why_none(node, arg)))
                continue
            pending.setdefault(id(arg), []).append(d)
    result = Gradients(found[id(x)] if id(x) in found else _zeros(x) for x in inputs)
    result.stops = tuple(stops)
    result.paths = tuple(paths)
    result.untouched = tuple(n for n in order if isinstance(n, Tensor) and not reaches[id(n)])
    if key is not None and not templates.known(key):
        templates.record(key, order, result)
    return result[0] if single else result


def _check_inputs(inputs) -> tuple:
    inputs = tuple(inputs)
    if not inputs:
        raise ValueError("lt.grad: inputs is empty; pass the tensors to differentiate with respect to")
    for i, x in enumerate(inputs):
        if not isinstance(x, Tensor):
            what = "an expression" if isinstance(x, Operand) else f"a {type(x).__name__}"
            raise TypeError(f"lt.grad: inputs[{i}] is {what}, not a Tensor: gradients are taken with respect to "
                            f"tensors (lt.asarray(...), or lt.evaluate(expr) and build the output from it)")
        if not differentiable(x.dtype):
            raise TypeError(f"lt.grad: inputs[{i}] is a {x.dtype.name} Tensor; only float and complex tensors have "
                            f"gradients (convert it with lt.asarray(x, dtype=np.float32) before building the output)")
    return inputs


def _check_output(output):
    if not isinstance(output, (Operand, np.ndarray)):
        raise TypeError(f"lt.grad: output must be a lazytensor expression or Tensor, not {type(output).__name__}")
    output = as_node(output)
    if output.dtype.kind == "c":
        raise TypeError(f"lt.grad: the output is {output.dtype.name}; a gradient needs a real loss (such as "
                        f"lt.abs(z) ** 2 or lt.real(z) summed)")
    if not is_float(output.dtype):
        raise TypeError(f"lt.grad: the output is {output.dtype.name}; integer and bool values have no gradient: "
                        f"differentiate a float expression (before a comparison or a cast to an integer)")
    return output


def _seed(output, grad_output):
    if grad_output is None:
        if output.size != 1:
            raise ValueError(f"lt.grad: the output has shape {output.shape}; a gradient needs a scalar output "
                             f"(such as lt.sum(output)) or grad_output of shape {output.shape}")
        return asarray(np.ones(output.shape, output.dtype), device=output.device)
    if not isinstance(grad_output, Operand):
        grad_output = asarray(grad_output, device=output.device)
    if tuple(grad_output.shape) != tuple(output.shape):
        raise ValueError(f"lt.grad: grad_output has shape {tuple(grad_output.shape)} but the output has shape "
                         f"{tuple(output.shape)}; they must be equal")
    if grad_output.device != output.device:
        raise ValueError(f"lt.grad: grad_output is on {grad_output.device!r} and the output on {output.device!r}; "
                         f"move it with lt.asarray(grad_output, device={output.device!r})")
    return astype(grad_output, output.dtype)


def _operands(node) -> tuple:
    """What a node reads: an expression's non-scalar arguments, a view tensor's base."""
    t = type(node)
    if t is Tensor:
        return () if node.view_of is None else (node.view_of[0],)
    args = node.args if t is Expr and node.result is None else computed(node).args
    return tuple([a for a in args if type(a) is not Const])


_standins: dict = {}       # id(evaluated node) -> (node, its stand-in), for one lt.grad call


def computed(node):
    return as_computed(node, _standins)


def _pattern_operands(root) -> list:
    """Every node below root (a pattern's operands are among them)."""
    return [n for n in _postorder(root) if n is not root]


def _postorder(root) -> list:
    """Every node under root once, each after all it reads (so reversed, before all its readers)."""
    order = []
    seen = {id(root)}
    stack = [(root, iter(_operands(root)))]
    while stack:
        node, operands = stack[-1]
        for child in operands:
            if id(child) not in seen:
                seen.add(id(child))
                stack.append((child, iter(_operands(child))))
                break
        else:
            stack.pop()
            order.append(node)
    return order


def _total(contributions, node):
    """The sum of contributions to `node`: added by shape (elementwise), reduced to node's shape
    over broadcast axes once per shape, cast to node's dtype."""
    by_shape: dict = {}
    for d in contributions:
        shape = tuple(d.shape)
        by_shape[shape] = d if shape not in by_shape else by_shape[shape] + d
    total = None
    for d in by_shape.values():
        d = sum_to(d, tuple(node.shape))
        total = d if total is None else total + d
    return astype(total, node.dtype)


def _zeros(x):
    """A zero gradient for x as a stride-0 view of one zero: no memory, nothing to compute first."""
    return broadcast_to(asarray(np.zeros((), x.dtype), device=x.device), x.shape)


def _why_none(node, arg) -> str:
    if not differentiable(arg.dtype):
        made = "a tensor" if isinstance(arg, Tensor) else f"{arg.op}"
        return f"its argument {made} has {arg.dtype.name} values: integer and bool values have no gradient"
    if node.op in PIECEWISE_CONSTANT:
        return f"{node.op} is piecewise constant: its gradient is zero almost everywhere"
    return f"{node.op} has no gradient with respect to this argument"
