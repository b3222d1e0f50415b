"""Gradient templates: lt.grad of a structure seen before, rebuilt over the new forward DAG's nodes
without running the rules again (a training loop asks for the same gradients every iteration).

A template is the gradient DAG that the rules built once, written as instructions over positions
in the forward DAG's postorder: each new node is (op, operands, shape, dtype, device, heavy,
attrs), an operand being a position (a forward node or an earlier new node) or an object the
rules made that holds no forward value (a scalar Const, a constant tensor such as the seed).

Design: docs/design/autodiff.md, section "lazytensor/autodiff/templates.py".
"""
from __future__ import annotations

from lazytensor.core.expr import Const, Expr
from lazytensor.core.memory import owner
from lazytensor.core.tensor import Tensor
from lazytensor.core.view_steps import tensor_view
from lazytensor.reuse.bounded import make_room
from lazytensor.reuse.recipes import const_part

MAX_TEMPLATES = 512
_templates: dict = {}       # forward key -> Template, or None where the gradient DAG cannot be one
_counts = {"hits": 0, "misses": 0}


def forward_key(order, inputs):
    """The structure of the forward DAG (its postorder) and of the inputs' places in it, or None
    when the gradient depends on more than structure (an evaluated node, a forward's filled
    BatchNorm holder, attributes that do not hash)."""
    index: dict = {}
    parts = []
    for node in order:
        t = type(node)
        if t is Tensor:
            v = node.view_of
            part = ("T", node.dtype, node.shape, node.device, None if v is None else (index[id(v[0])], v[1]))
        elif t is Expr:
            if node.result is not None:
                return None
            attrs = node.attrs
            saved = getattr(attrs, "saved", None)
            if saved is not None:
                if getattr(saved, "saved_mean", None) is not None:
                    return None             # the backward reads this forward's own saved arrays
                attrs = ("saved", attrs.structure)
            part = ("E", node.op, node.dtype, node.shape, node.device, node.heavy, attrs,
                    tuple([const_part(a) if type(a) is Const else index[id(a)] for a in node.args]))
        else:
            return None
        index[id(node)] = len(parts)
        parts.append(part)
    places = tuple([index.get(id(x)) for x in inputs])
    if None in places:
        return None                         # an input the output does not read: lt.grad says so
    try:
        return _Key((tuple(parts), places))
    except TypeError:                       # attributes that do not hash
        return None


class _Key:
    """A forward key with its hash computed once (a lookup, then a record, hash it again)."""
    __slots__ = ("parts", "hash")

    def __init__(self, parts):
        self.parts = parts
        self.hash = hash(parts)

    def __hash__(self):
        return self.hash

    def __eq__(self, other):
        return self.parts == other.parts


def lookup(key):
    """The template recorded for `key` (moved to the young end), or None."""
    template = _templates.pop(key, None)
    if template is not None:
        _templates[key] = template
        _counts["hits"] += 1
    else:
        _counts["misses"] += 1
    return template


def known(key) -> bool:
    return key in _templates


def record(key, order, gradients) -> None:
    """Keep the gradient DAG lt.grad just built for the forward DAG `order` as the template of
    `key` (None where it holds what a template cannot: then lt.grad runs the rules each time)."""
    make_room(_templates, MAX_TEMPLATES)
    _templates[key] = Template.of(order, gradients)


def clear() -> None:
    _templates.clear()
    _counts["hits"] = _counts["misses"] = 0


def counts() -> dict:
    return {**_counts, "templates": sum(t is not None for t in _templates.values())}


class _NotATemplate(Exception):
    pass


class Template:
    __slots__ = ("size", "instructions", "results", "stops", "paths", "untouched")

    @classmethod
    def of(cls, order, gradients):
        try:
            return cls(order, gradients)
        except _NotATemplate:
            return None

    def __init__(self, order, gradients):
        recorder = _Recorder(order)
        position = recorder.position
        results = []
        for g in gradients:
            if type(g) is Tensor and id(g) not in position and id(owner(g.data)) not in recorder.forward_memory:
                # A constant the rules made (a broadcast seed, a zero): the caller may write to it, so
                # each instantiation makes its own.
                base, steps = g.view_of if g.view_of is not None else (g, ())
                recorder.place(g, (_FRESH, base.data, base.device, steps))
            results.append(_walk(g, recorder))
        self.size = len(order)
        self.instructions = tuple(recorder.instructions)
        self.results = tuple(results)
        self.stops = tuple((position[id(n)], i, why) for n, i, why in gradients.stops)
        self.paths = tuple((position[id(n)], what) for n, what in gradients.paths)
        self.untouched = tuple(position[id(n)] for n in gradients.untouched)

    def instantiate(self, order, gradients_type):
        """The gradients over the forward DAG `order` (of the template's key), as lt.grad returns."""
        nodes = list(order)
        append = nodes.append
        for instruction in self.instructions:
            kind = instruction[0]
            if kind is _VIEW:
                append(tensor_view(nodes[instruction[1]], instruction[2]))
                continue
            if kind is _FRESH:
                _, data, device, steps = instruction
                fresh = Tensor(data.copy(), device)
                append(tensor_view(fresh, steps) if steps else fresh)
                continue
            op, args, shape, dtype, device, heavy, attrs = instruction
            append(Expr(op, tuple([nodes[a] if type(a) is int else a for a in args]), shape, dtype, device,
                        heavy, attrs))
        result = gradients_type(nodes[r] for r in self.results)
        result.stops = tuple((nodes[p], i, why) for p, i, why in self.stops)
        result.paths = tuple((nodes[p], what) for p, what in self.paths)
        result.untouched = tuple(nodes[p] for p in self.untouched)
        result.from_template = True
        return result


class _Recorder:
    """The instructions of a gradient DAG over the forward DAG `order`, one node at a time."""

    def __init__(self, order):
        self.position = {id(n): i for i, n in enumerate(order)}
        self.forward_memory = {id(owner(n.data)) for n in order if type(n) is Tensor}
        self.instructions = []
        self.size = len(order)

    def place(self, node, instruction) -> int:
        at = self.position[id(node)] = self.size + len(self.instructions)
        self.instructions.append(instruction)
        return at

    def ref(self, node):
        """node's place in the template (its operands placed already: see _walk), or the object itself."""
        at = self.position.get(id(node))
        if at is not None:
            return at
        t = type(node)
        if t is Const:
            return node
        if t is Tensor:
            if id(owner(node.data)) not in self.forward_memory:
                return node             # a constant the rules made (the seed, a zero, a table), or a view of one
            if node.view_of is None:
                raise _NotATemplate("a tensor over a forward tensor's memory, not as its view")
            base, steps = node.view_of
            return self.place(node, (_VIEW, self.position[id(base)], steps))
        if t is not Expr or node.result is not None:
            raise _NotATemplate("an evaluated node")
        if node.attrs is not None and getattr(node.attrs, "saved", None) is not None:
            raise _NotATemplate("a node holding a forward's saved results")
        args = tuple([self.ref(a) for a in node.args])
        return self.place(node, (node.op, args, node.shape, node.dtype, node.device, node.heavy, node.attrs))


_VIEW = object()     # an instruction's mark: a view of a tensor, (mark, its base's position, view steps)
_FRESH = object()    # a constant gradient made anew, (mark, its base's array, device, view steps)


def _walk(root, recorder):
    """recorder.ref(root), each new node after what it reads, without recursion (gradient DAGs run deep)."""
    position, ref = recorder.position, recorder.ref
    stack = [root]
    done: set = set()
    while stack:
        node = stack[-1]
        if id(node) in position or id(node) in done:
            stack.pop()
            continue
        t = type(node)
        below = node.args if t is Expr else (node.view_of[0],) if t is Tensor and node.view_of is not None else ()
        pending = [a for a in below if type(a) is not Const and id(a) not in position and id(a) not in done]
        if pending:
            pending.reverse()
            stack.extend(pending)
            continue
        stack.pop()
        done.add(id(node))
        ref(node)
    return ref(root)
