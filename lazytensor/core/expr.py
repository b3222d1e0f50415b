"""The expression IR: immutable nodes that describe a computation and compute nothing.

A node has an op, args, shape, dtype and device, fixed at construction. Type promotion follows
NumPy exactly (each op's rule comes from the op table); where an operand's dtype differs from the
op's loop dtype, an explicit `astype` node is inserted, so code generators see exact types.
"""
from __future__ import annotations

import os
import weakref

import numpy as np

from lazytensor.kernels.ops import OPS
from lazytensor.core.operand import Operand
from lazytensor.core.tensor import Tensor, as_node
from lazytensor.core.const import Const, constant
from lazytensor.core.structure_ids import _structures, structure_id
from lazytensor.core import dtypes as _dt
from lazytensor.core.rewrites import REWRITES
from lazytensor.core.render_tree import render_tree
from lazytensor.core.shapes import broadcast_shapes
from lazytensor.core.readers import Memory, memory_of, register

try:
    from lazytensor.core import _nodes      # the node builders of seen cases, in C
except ImportError:                         # not built where lazytensor was installed: Python's own
    _nodes = None


RESULTS = [0]       # how many nodes have been given a result so far (see Expr.epoch)
_ref = weakref.ref


class Expr(Operand):
    """An op applied to operands. Besides the IR fields it carries what dispatch needs without a
    walk: `skey` (structure id), `leaves` (tensors read, left to right, repeats kept), `scalars`
    (scalar values, left to right), and `shared` (some node below is used more than once).

    Values stay values: a node registers with the memory of each Tensor it reads directly
    (lazytensor.core.readers), so that a write to that memory first settles it
    (lazytensor.assign.writes). Once evaluated, a node keeps its value in `result` (a Tensor) and
    releases its operands; a node built on it reads that Tensor instead, so a loop that rebinds
    `w = w - lr * g` stays one level deep. `epoch` is the count of results given out when the
    oldest node of its DAG was built (or last settled): a node over a DAG in which some node may
    have got a result since is re-read (`settle`) before it is planned."""
    __slots__ = ("op", "args", "shape", "dtype", "device", "heavy", "attrs", "skey", "leaves", "scalars",
                 "shared", "uses", "heavy_uses", "last_plan", "result", "epoch", "origin", "__weakref__")

    def __init__(self, op: str, args: tuple, shape: tuple, dtype: np.dtype, device, heavy=False, attrs=None):
        self.op = op
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.attrs = attrs          # op parameters that are part of the structure (e.g. an axis)
        self.uses = 0               # how many nodes have taken this one as an operand (heavy ones: heavy_uses)
        self.last_plan = None       # (destination array, steps): re-assigning skips the planner
        self.result = None          # the Tensor holding this node's value, once evaluated
        self.origin = None          # once evaluated: how it was computed, for gradients (Origin)
        self.heavy = heavy          # a node that is not elementwise (reduction, conv) lies below
        if heavy:
            self.args = args = settled_args(args)
            epoch = RESULTS[0]
            for a in args:
                t = type(a)
                if t is Tensor:
                    register(self, _ref(self), a)
                elif t is Expr:
                    # uses, for the nodes built here (set where first needed: other builders never read it)
                    a.heavy_uses = getattr(a, "heavy_uses", 0) + 1
                    if a.epoch < epoch:
                        epoch = a.epoch
            self.epoch = epoch
            # Never lowered as a whole: the planner cuts it into steps first (lazytensor.plan.planner).
            self.skey = None
            self.shared = True
            self.leaves = self.scalars = ()
            return
        self.args = args
        shared = False
        leaves = ()
        scalars = ()
        key = [op, dtype, attrs]
        me = None
        epoch = RESULTS[0]
        for a in args:
            t = type(a)
            if t is Expr:
                if a.result is not None:        # evaluated since the caller looked: read its result
                    self.__init__(op, settled_args(args), shape, dtype, device, False, attrs)
                    return
                if a.epoch < epoch:
                    epoch = a.epoch
                key.append(a.skey)
                a.uses += 1
                if a.uses > 1 or a.shared:
                    shared = True
                leaves += a.leaves
                scalars += a.scalars
            elif t is Const:
                key.append(a.skey)
                scalars += a.scalars
            else:
                key.append(a.skey)
                leaves += (a,)
                if me is None:
                    me = _ref(self)
                m = a.memory            # inline register(): this runs for every operator
                if m is None:
                    m = memory_of(a)
                m.append(me)
                if len(m) > m.limit:
                    m.sweep()
        self.epoch = epoch
        self.shared = shared
        self.leaves = leaves
        self.scalars = scalars
        key = tuple(key)
        sid = _structures.get(key)
        self.skey = sid if sid is not None else structure_id(key)

    def keep_result(self, result, origin=None) -> None:
        """This node's value is now `result` (a Tensor): later reads use it, the operands go, kept
        only in `origin` for lt.grad, which checks that none of the tensors they read was written since.
        origin: Origin(self) made already, when the node was evaluated (lazytensor.core.origins)."""
        self.origin = origin if origin is not None else Origin(self)
        self.result = result
        self.args = ()
        self.leaves = self.scalars = ()
        self.heavy = False
        self.last_plan = None
        register(self, _ref(self), result)      # a write to the result's memory settles this node first
        RESULTS[0] += 1

    def settle(self) -> None:
        """Re-read this node over the results its descendants got since it was built (their
        operands are gone): afterwards it reads those results, as if built now."""
        if self.epoch == RESULTS[0] or self.result is not None:
            return
        fresh = _settled(self, {})
        if fresh is not self:
            self.args, self.heavy, self.skey, self.shared = fresh.args, fresh.heavy, fresh.skey, fresh.shared
            self.leaves, self.scalars = fresh.leaves, fresh.scalars
            me = _ref(self)
            for a in fresh.args:
                if type(a) is Tensor:
                    register(self, me, a)
        self.last_plan = None
        self.epoch = RESULTS[0]

    def __repr__(self):
        return (f"Expr({render_tree(self)}, shape={self.shape}, dtype={self.dtype.name}, "
                f"device={self.device!r})")


def settled_args(args) -> tuple:
    """`args` with every evaluated node replaced by its result."""
    for a in args:
        if type(a) is Expr and a.result is not None:
            return tuple(a.result if type(a) is Expr and a.result is not None else a for a in args)
    return args


def _settled(node, memo):
    """`node` over its descendants' results (a new node where something below changed)."""
    if type(node) is not Expr:
        return node
    if node.result is not None:
        return node.result
    if node.op == "forward_saved":
        return node         # it reads its forward's node for what that wrote beside its value, evaluated or not
    hit = memo.get(id(node))
    if hit is None:
        args = tuple(_settled(a, memo) for a in node.args)
        if all(a is b for a, b in zip(args, node.args)):
            hit = node
            node.epoch = RESULTS[0]         # nothing below it has a result: settled as it is
        else:
            heavy = node.op not in OPS and node.op != "astype"     # a heavy op itself, or above one
            for a in args:
                heavy = heavy or a.heavy
            hit = Expr(node.op, args, node.shape, node.dtype, node.device, heavy, node.attrs)
        memo[id(node)] = hit
    return hit


_rules: dict = {}


def _resolve(op: str, types: tuple):
    key = (op, types)
    rule = _rules.get(key)
    if rule is None:
        try:
            rule = OPS[op].dtype_rule(types)
        except Exception as exc:   # NumPy's own words: which op, which input types
            names = ", ".join(t.name if isinstance(t, np.dtype) else f"Python {t.__name__}" for t in types)
            rule = TypeError(f"{op} is not supported for ({names}): {exc}")
        _rules[key] = rule
    if isinstance(rule, Exception):
        raise TypeError(str(rule))
    return rule


def _device_of(devices) -> str | None:
    device = None
    for d in devices:
        if d is not None and d != device:
            if device is not None:
                raise ValueError(f"expression mixes devices {device!r} and {d!r}: move one operand with "
                                 f"lt.asarray(x, device={device!r})")
            device = d
    return device


def astype(node, dtype) -> "Expr":
    dtype = _dt.check_supported(dtype)
    if node.dtype == dtype:
        return node
    return Expr("astype", (node,), node.shape, dtype, node.device, node.heavy)


_WEAK = {float: float, int: int, complex: complex, bool: np.dtype(bool)}


def apply(op: str, *operands) -> Expr:
    """Build the node for `op(*operands)`; operands are nodes or scalars. This runs for every
    operator a user writes, so it is kept to a handful of dict lookups."""
    if op in REWRITES:
        replacement = REWRITES[op](*operands)
        if replacement is not None:
            return apply(*replacement)
    types = []
    for x in operands:
        if isinstance(x, Operand):
            types.append(x.dtype)
        else:
            t = _WEAK.get(type(x))
            if t is None:
                if isinstance(x, np.ndarray):
                    return apply(op, *[_numpy_operand(y) for y in operands])
                t = _dt.operand_type(x)
            types.append(t)
    types = tuple(types)
    rule = _rules.get((op, types))
    if rule is None or type(rule) is TypeError:
        rule = _resolve(op, types)
    loop, out = rule
    args = []
    heavy = False
    device = None
    shape = None
    for x, want in zip(operands, loop):
        if isinstance(x, Operand):
            if x.dtype is not want and x.dtype != want:
                x = Expr("astype", (x,), x.shape, want, x.device, x.heavy)
            if x.heavy:
                heavy = True
            d = x.device
            if d is not device:
                device = d if device is None else _device_of((device, d))
            s = x.shape
            if shape is None or s == shape:
                shape = s
            else:
                shape = broadcast_shapes(shape, s) if len(operands) == 2 else None
        else:
            if type(x) is int and want.kind in "iu":
                try:
                    _dt.scalar_value(x, want)     # NumPy's OverflowError for out-of-range Python ints
                except OverflowError:
                    constant = _compare_out_of_range(op, operands)
                    if constant is None:
                        raise
                    return constant
            elif isinstance(x, np.generic):
                x = x.item()
            x = Const(x, want)
        args.append(x)
    if shape is None or len(args) > 2:
        shape = broadcast_shapes(*(a.shape for a in args))
    return Expr(op, tuple(args), shape, out, device, heavy)


# The nodes operators build, by case: (key of a, key of b) -> (structure id, dtype, loop dtype of a,
# of b, the case's interned Consts) in the table of each binary op (_binary_cases), and
# structure id of x -> (structure id, dtype) in the table of each unary op (_unary_cases).
# An operand's key is its structure id, which fixes its dtype (every structure key holds one), or a
# Python scalar's type: so ONE lookup stands for the type rule, the test that no astype is needed,
# and the new node's structure id, all of which the general path (apply) worked out the first time.
# Only cases whose outcome never depends on a scalar's value are kept: no rewrite (x ** 2), no
# Python int in an integer loop (NumPy's overflow check), at least one operand a node, none heavy.
_binary_cases: dict = {}        # op -> {(key of a, key of b): case}, one table per operator
_unary_cases: dict = {}         # op -> {structure id of x: case}
_SCALAR_KEYS = (int, float, bool)


def binary(op: str, a, b) -> Expr:
    """The node of `a <op> b`, as apply(op, a, b) builds it (operator_function's, for callers that
    name the op)."""
    f = _operators.get(op)
    if f is None:
        f = _operators[op] = operator_function(op)
    return f(a, b)


_operators: dict = {}


def operator_function(op: str, reflected: bool = False):
    """The function behind one operator, `a <op> b` (reflected: called as b's `__r<op>__(b, a)`).
    A case seen before (_binary_cases) builds the node here, unrolled: every operator a user writes runs
    this, so it is the fields Expr.__init__ computes, without a loop, a key list or a second lookup,
    one weak reference for the reader records of both tensors (lazytensor.core.readers), and no
    second call: the Operand's method IS this function (lazytensor.array_methods)."""
    cases = _binary_cases.setdefault(op, {})

    def build(a, b) -> Expr:
        if reflected:
            a, b = b, a
        ta = type(a)
        tb = type(b)
        ka = a.skey if ta is _Tensor or (ta is Expr and a.result is None) else ta
        kb = b.skey if tb is _Tensor or (tb is Expr and b.result is None) else tb
        case = cases.get((ka, kb))
        if case is None:
            return _first_binary(op, a, b, ka, kb)
        if ta is Expr or ta is _Tensor:             # shape and device first: they may raise
            if tb is Expr or tb is _Tensor:
                shape = a.shape
                if b.shape != shape:
                    shape = broadcast_shapes(shape, b.shape)
                device = a.device
                if b.device is not device:
                    device = _device_of((device, b.device))
            else:
                shape = a.shape
                device = a.device
        else:
            shape = b.shape
            device = b.device
        node = _new(Expr)
        node.op = op
        node.skey, node.dtype, la, lb, consts = case
        node.heavy = False
        node.attrs = None
        node.uses = 0
        node.last_plan = None
        node.result = None
        node.origin = None
        shared = False
        me = None
        if ta is Expr:
            epoch = a.epoch
            uses = a.uses = a.uses + 1
            shared = uses > 1 or a.shared
            leaves = a.leaves
            scalars = a.scalars
        elif ta is _Tensor:
            epoch = RESULTS[0]
            leaves = (a,)
            scalars = ()
            me = _ref(node)
            m = a.memory
            if m is None:
                m = memory_of(a)
            m.append(me)
            if len(m) > m.limit:
                m.sweep()
        else:
            epoch = RESULTS[0]
            a = consts.get(a) or constant(a, la, consts)
            leaves = ()
            scalars = a.scalars
        if tb is Expr:
            if b.epoch < epoch:
                epoch = b.epoch
            uses = b.uses = b.uses + 1
            if uses > 1 or b.shared:
                shared = True
            leaves = leaves + b.leaves if leaves else b.leaves
            scalars += b.scalars
        elif tb is _Tensor:
            leaves += (b,)
            if me is None:
                me = _ref(node)
            m = b.memory
            if m is None:
                m = memory_of(b)
            m.append(me)
            if len(m) > m.limit:
                m.sweep()
        else:
            b = consts.get(b) or constant(b, lb, consts)
            scalars += b.scalars
        node.shape = shape
        node.device = device
        node.args = (a, b)
        node.leaves = leaves
        node.scalars = scalars
        node.epoch = epoch
        node.shared = shared
        return node
    build.__name__ = build.__qualname__ = op
    return compiled(build, _nodes and _nodes.BinaryBuilder, op, cases, reflected)


def _first_binary(op, a, b, ka, kb) -> Expr:
    """binary() for a case not seen before: the general path, kept as a case where it may be."""
    node = apply(op, a, b)
    if (op not in REWRITES and type(node) is Expr and not node.heavy and node.op == op
            and (type(ka) is int or ka in _SCALAR_KEYS) and (type(kb) is int or kb in _SCALAR_KEYS)
            and (type(ka) is int or type(kb) is int)):
        x, y = node.args
        if ((x is a or (type(x) is Const and not (ka is int and x.dtype.kind in "iu")))
                and (y is b or (type(y) is Const and not (kb is int and y.dtype.kind in "iu")))):
            cases = _binary_cases[op]
            if len(cases) > 4096:       # a program that builds ever new structures: start again
                cases.clear()
            cases[(ka, kb)] = (node.skey, node.dtype, x.dtype, y.dtype, {})
    return node


def unary(op: str, x) -> Expr:
    """The node of `op(x)`, as apply(op, x) builds it (unary_function's, for callers that name the op)."""
    f = _unary_functions.get(op)
    if f is None:
        f = _unary_functions[op] = unary_function(op)
    return f(x)


_unary_functions: dict = {}


def unary_function(op: str):
    """The function `op(x)` (lt.exp, lt.relu, ...): the node as apply(op, x) builds it; a case seen
    before (structure id of x -> the node's structure id and dtype) in one lookup of its own table."""
    cases = _unary_cases.setdefault(op, {})

    def build(x) -> Expr:
        t = type(x)
        if t is _Tensor or (t is Expr and x.result is None):
            case = cases.get(x.skey)
            if case is not None:
                return _single(op, x, case[0], case[1])
            node = apply(op, x)
            if (op not in REWRITES and type(node) is Expr and not node.heavy and node.op == op
                    and node.args[0] is x and type(x.skey) is int):
                if len(cases) > 4096:       # a program that builds ever new structures: start again
                    cases.clear()
                cases[x.skey] = (node.skey, node.dtype)
            return node
        return apply(op, x)
    build.__name__ = build.__qualname__ = op
    return compiled(build, _nodes and _nodes.UnaryBuilder, op, cases)


def compiled(build, builder_type, op, cases, *reflected):
    """The builder in C (lazytensor/core/_nodes.c) that takes the cases seen before (`cases`) and
    leaves every other call to `build`, the Python builder, which it keeps as `.python`; `build`
    itself where the extension is not built."""
    if builder_type is None:
        return build
    f = builder_type(op, cases, build, *reflected)
    f.__name__ = f.__qualname__ = op
    return f


_new = object.__new__


def _single(op, x, sid, dtype) -> Expr:
    """Expr(op, (x,), x.shape, dtype, x.device) over a Tensor or an unevaluated, not heavy node,
    whose structure id is `sid`: binary's unrolling for one operand."""
    node = _new(Expr)
    node.op = op
    node.args = (x,)
    node.shape = x.shape
    node.dtype = dtype
    node.device = x.device
    node.heavy = False
    node.attrs = None
    node.uses = 0
    node.last_plan = None
    node.result = None
    node.origin = None
    node.skey = sid
    if type(x) is Expr:
        node.epoch = x.epoch
        uses = x.uses = x.uses + 1
        node.shared = uses > 1 or x.shared
        node.leaves = x.leaves
        node.scalars = x.scalars
    else:
        node.epoch = RESULTS[0]
        node.shared = False
        node.leaves = (x,)
        node.scalars = ()
        m = x.memory
        if m is None:
            m = memory_of(x)
        m.append(_ref(node))
        if len(m) > m.limit:
            m.sweep()
    return node


def heavy_over_tensor(op, x, shape, dtype, attrs) -> Expr:
    """Expr(op, (x,), shape, dtype, x.device, heavy=True, attrs=attrs) for a Tensor x, unrolled as
    _single is: `x.sum()` on small arrays (lazytensor.ops.reductions); in C where the extension is."""
    if _nodes is not None:
        node = _nodes.heavy_over_tensor(op, x, shape, dtype, attrs)
        if node is not None:
            return node
    node = _new(Expr)
    node.op = op
    node.args = (x,)
    node.shape = shape
    node.dtype = dtype
    node.device = x.device
    node.heavy = True
    node.attrs = attrs
    node.uses = 0
    node.last_plan = None
    node.result = None
    node.origin = None
    node.skey = None
    node.shared = True
    node.leaves = node.scalars = ()
    node.epoch = RESULTS[0]
    m = x.memory
    if m is None:
        m = memory_of(x)
    m.append(_ref(node))
    if len(m) > m.limit:
        m.sweep()
    return node


def _numpy_operand(x):
    """A NumPy array in an expression: a 0-d one is a (strong) NumPy scalar, as NumPy treats it,
    and so works with tensors on any device; others become CPU tensors."""
    if isinstance(x, np.ndarray):
        return x[()] if x.ndim == 0 else as_node(x)
    return x


# A comparison read from its Operand's side: `value < x` is `x > value`.
_FROM_OPERAND = {"equal": "equal", "not_equal": "not_equal", "less": "greater", "less_equal": "greater_equal",
                 "greater": "less", "greater_equal": "less_equal"}


def _compare_out_of_range(op: str, operands):
    """NumPy 2 compares an integer operand with a Python int beyond its dtype's range exactly
    (int8 < 300 is True everywhere), however large the int. Every element then compares alike, so
    the result is a constant of the operand's shape and device: x == x (all True, integers have
    no NaN) or x != x (all False). None where NumPy raises instead: other ops, and bool operands,
    which meet a Python int in an int64 loop."""
    if op not in _FROM_OPERAND:
        return None
    a, b = operands
    x, value, x_left = (a, b, True) if type(b) is int else (b, a, False)
    if not isinstance(x, Operand) or x.dtype.kind not in "iu":
        return None
    relation = op if x_left else _FROM_OPERAND[op]
    above = value > 0                   # beyond the range: above its maximum or below its minimum
    true = {"equal": False, "not_equal": True, "less": above, "less_equal": above,
            "greater": not above, "greater_equal": not above}[relation]
    return apply("equal" if true else "not_equal", x, x)


# The operators' paths test types by identity; the builders in C take their cases (unless
# LAZYTENSOR_PYTHON_NODES=1 asks for the Python builders alone, to compare the two).
_Tensor = Tensor
if _nodes is not None:
    _nodes.setup(Expr, Tensor, Const, Memory, RESULTS, broadcast_shapes, _device_of, memory_of, constant)
    _nodes.set_enabled(os.environ.get("LAZYTENSOR_PYTHON_NODES", "") in ("", "0"))


def node_builder() -> str:
    """Which builder takes the operators' known cases: 'C' or 'Python (why)'."""
    if _nodes is None:
        return "Python (the C extension lazytensor.core._nodes is not built)"
    was = _nodes.set_enabled(True)
    _nodes.set_enabled(was)
    return "C (lazytensor.core._nodes)" if was else "Python (LAZYTENSOR_PYTHON_NODES=1)"


class Origin:
    """How an evaluated node was computed: its op's operands and whether it was heavy, with the
    write count of every tensor's memory below it at evaluation, so that a gradient taken through
    it later can tell that its operands still hold the values it was computed from. The counts live
    in a WriteCounts that every Origin made by one evaluation shares (`mask`: its tensors' bits)."""
    __slots__ = ("args", "heavy", "counts", "mask", "__weakref__")

    def __init__(self, node):
        self.args, self.heavy = node.args, node.heavy
        tensors, seen, stack = [], set(), list(node.args)
        while stack:
            a = stack.pop()
            if id(a) in seen:
                continue
            seen.add(id(a))
            if type(a) is Tensor:
                tensors.append(a)
            elif type(a) is Expr:
                stack.extend(a.origin.args if a.result is not None and a.origin is not None else a.args)
        self.counts = WriteCounts(tensors)
        self.mask = (1 << len(tensors)) - 1
        self.counts.add(self)

    @property
    def versions(self) -> list:
        """[(tensor, its write count at evaluation)] of the tensors below the node."""
        mask = self.mask
        return [(t, v) for k, (t, v) in enumerate(zip(self.counts.tensors, self.counts.versions)) if mask >> k & 1]

    def also(self, t) -> None:
        """Record tensor `t`'s write count of now too (the node's own memory, once it holds its value)."""
        self.mask |= 1 << self.counts.append(t)

    def stale(self):
        """A tensor written since the node was evaluated, or None."""
        mask = self.mask
        counts = self.counts
        for k, m in enumerate(counts.memories):
            if mask >> k & 1 and m.version != counts.versions[k]:
                return counts.tensors[k]
        return None


class WriteCounts:
    """The write counts of some tensors' memories at one moment, shared by the Origins of the nodes
    evaluated then (an optimizer step makes one per gradient, update and loss: each would otherwise
    copy and register the same counts). Each memory knows it by weak reference, once, so that a
    write lets the Origins it made stale drop their operands (Memory.drop_stale_origins)."""
    __slots__ = ("tensors", "memories", "versions", "origins", "known", "__weakref__")

    def __init__(self, tensors):
        self.tensors, self.memories, self.versions = [], [], []
        self.origins = []           # weak references to the Origins over these counts
        self.known = set()          # ids of the memories that know of these counts
        for t in tensors:
            self.append(t)

    def append(self, t) -> int:
        """Record `t`'s count of now; -> its position (its bit in an Origin's mask)."""
        m = memory_of(t)
        if id(m) not in self.known:         # (the memories are held in self.memories: ids stay theirs)
            self.known.add(id(m))
            m.keep_origin(_ref(self))
        self.tensors.append(t)
        self.memories.append(m)
        self.versions.append(m.version)
        return len(self.tensors) - 1

    def add(self, origin) -> None:
        self.origins.append(_ref(origin))

    def drop_stale(self, memory) -> bool:
        """Let each Origin over a count of `memory` that a write since made stale drop its operands
        (a gradient through it is refused anyway, Origin.stale); -> whether any Origin is left."""
        bits = 0
        for k, m in enumerate(self.memories):
            if m is memory and m.version != self.versions[k]:
                bits |= 1 << k
        kept = []
        for r in self.origins:
            origin = r()
            if origin is None:
                continue
            if origin.mask & bits:
                origin.args = ()
            else:
                kept.append(r)
        self.origins = kept
        return bool(kept)


def as_computed(node, cache=None):
    """The node as it was computed: itself, or for an evaluated node (which keeps its value and drops
    its operands, docs/guide/arrays.md "Values stay values") a stand-in with the operands kept in its origin,
    provided none of the tensors below was written since (else its gradient cannot be had)."""
    if type(node) is not Expr or node.result is None:
        return node
    hit = None if cache is None else cache.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    origin = node.origin
    stale = None if origin is None else origin.stale()
    if origin is None or stale is not None:
        what = "" if stale is None else f": a tensor it read ({stale.dtype.name} {stale.shape}) was written since"
        raise ValueError(f"the expression {node!r:.120} was evaluated and its operands are gone{what}; "
                         f"take gradients (or backward ops) before writing the tensors it reads")
    stand_in = object.__new__(Expr)         # not built through Expr(): its operands stay as they were
    for slot, v in (("op", node.op), ("args", origin.args), ("shape", node.shape), ("dtype", node.dtype),
                    ("device", node.device), ("heavy", origin.heavy), ("attrs", node.attrs), ("skey", None),
                    ("leaves", ()), ("scalars", ()), ("shared", True), ("uses", 0), ("last_plan", None),
                    ("result", None), ("epoch", node.epoch), ("origin", None)):
        setattr(stand_in, slot, v)
    if cache is not None:
        cache[id(node)] = (node, stand_in)
    return stand_in
