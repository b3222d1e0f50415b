"""Plan recipes: a heavy expression's plan is made once per structure and rebound to new arrays.

Design: docs/design/caches.md, section "lazytensor/reuse/recipes.py".
"""
from __future__ import annotations

import functools
import math
import sys

import numpy as np

from lazytensor.core.expr import Const
from lazytensor.kernels.config import config
from lazytensor.reuse import replay as graph_replay
from lazytensor.reuse.misses import miss_reason
from lazytensor.reuse.bounded import make_room
from lazytensor.core.memory import address, extent, owner, owner_address
from lazytensor.core.tensor import Tensor

_MAX_RECIPES = 256
_recipes: dict = {}
PLAN_EACH_TIME = object()   # a signature whose plan holds a view of an input or of the destination



def scalar_key(v):
    """A scalar's place in a plan's key: NaN equals itself, and -0.0 differs from 0.0 (equal as
    floats, but a plan bakes its scalars in, and x * -0.0 is not x * 0.0)."""
    if v != v:
        return "nan"
    if v == 0:
        try:
            if math.copysign(1.0, v) < 0:
                return "-0"
        except TypeError:               # a complex zero: no sign to keep apart here
            pass
    return v


def tensor_layout(node) -> tuple:
    """(its part of a key, id of its array's owner, its address) of a Tensor node, read once and
    kept on the node: a tensor's array never changes."""
    layout = node.layout
    if layout is None:
        a = node.data
        at = address(a)
        layout = node.layout = (("T", node.dtype, node.shape, a.strides, place(a), at & 15), id(owner(a)), at)
    return layout


def const_part(node) -> tuple:
    v = node.value
    return ("C", node.dtype, type(v), scalar_key(v))

def place(a):
    """The device an array lives on, as part of a signature."""
    device = getattr(a, "device", None)
    return getattr(device, "id", None)


def _is_array(v) -> bool:
    if isinstance(v, np.ndarray):
        return True
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(v, cupy.ndarray)


def signature(root, out):
    """-> (key, tensors, holders, addresses) of the expression `root` assigned into the array `out`
    (addresses: of the tensors' arrays, in order), or None when the plan must be made afresh (the
    destination shares memory with an input)."""
    index: dict = {}                # id(node) -> position in `parts`
    parts: list = []
    tensors: list = []
    addresses: list = []
    holders: list = []
    owners: dict = {id(owner(out)): -1}
    consts: dict = {}                 # a Const's part -> its position
    stack = [root]
    while stack:
        node = stack[-1]
        if id(node) in index:
            stack.pop()
            continue
        t = type(node)
        if t is Tensor:
            a = node.data
            layout = tensor_layout(node)
            first = owners.setdefault(layout[1], len(tensors))
            if first == -1:
                return None                 # the destination's memory is read: aliasing depends on addresses
            part = (layout[0], first)
            tensors.append(a)
            addresses.append(layout[2])
        elif t is Const:
            part = const_part(node)
            known = consts.get(part)
            if known is not None:           # equal scalars plan alike, one object or several
                stack.pop()
                index[id(node)] = known
                continue
            consts[part] = len(parts)
        else:
            args = node.args
            pending = [a for a in args if id(a) not in index]
            if pending:                     # operands first, left to right; then this node again
                pending.reverse()
                stack.extend(pending)
                continue
            attrs = node.attrs
            holder = getattr(attrs, "saved", None)
            if holder is not None:
                holders.append(holder)
                attrs = attrs.structure
            part = ("E", node.op, node.dtype, node.shape, attrs, tuple([index[id(a)] for a in args]))
        stack.pop()
        index[id(node)] = len(parts)
        parts.append(part)
    key = (tuple(parts), out.shape, out.strides, out.dtype, place(out), address(out) & 15, type(out))
    return key, tensors, holders, addresses


class Source(tuple):
    """Where a recipe's array comes from (see Recipe): a tuple that rebinding does not descend into."""
    __slots__ = ()


class Recipe:
    """The steps of one plan with every array replaced by where it comes from, so that the recipe
    holds no memory: ("tensor", i), ("out",), ("within", i, byte offset, shape, dtype, strides) for
    a view lying inside the C-contiguous tensor i, or ("temp", j, byte offset, shape, dtype, strides)
    for an array in the j-th allocation the plan made (a temporary, or a view of one). A fresh
    allocation of the same span replaces each at every instantiation, the arrays at the same
    offsets in it. The distinct sources are numbered, and each step is rebuilt by a small
    generated function that reads its arrays from the list of resolved sources."""

    def __init__(self, steps, tensors, out, holders, backend):
        self.backend = backend
        owners: dict = {}                   # id(owner) -> j
        spans: list = []                    # per allocation: [bytes it must hold, (shape, dtype) of an array filling it]
        where = {id(a): Source(("tensor", i)) for i, a in enumerate(tensors)}
        where[id(out)] = Source(("out",))
        reserved = {id(owner(a)) for a in (*tensors, out)}
        numbers: dict = {}                  # Source -> its index in self.sources

        inside: dict = {}                   # id(owner) -> [(i, lowest, highest byte)] of the C-contiguous tensors

        def within(a):
            """(i, offset) where `a` lies inside the C-contiguous tensor i (a transposed view of a
            weight gradient's segment of a region, made while planning), else None."""
            if not inside:
                for i, t in enumerate(tensors):
                    if t.flags.c_contiguous:
                        inside.setdefault(id(owner(t)), []).append((i, *extent(t)))
                inside[None] = []
            lo, hi = extent(a)
            for i, tlo, thi in inside.get(id(owner(a)), ()):
                if tlo <= lo and hi <= thi:
                    return i, address(a) - address(tensors[i])
            return None

        def source(a):
            src = where.get(id(a))
            if src is None:
                own = owner(a)
                if id(own) in reserved:
                    found = within(a)
                    if found is None:
                        raise _NotRebindable("a step holds a view of an input or of the destination")
                    src = Source(("within", *found, a.shape, a.dtype, a.strides))
                    return Source((numbers.setdefault(src, len(numbers)),))
                j = owners.get(id(own))
                if j is None:
                    j = owners[id(own)] = len(spans)
                    spans.append([0, None])
                base = owner_address(own)
                lo, hi = extent(a)
                offset = address(a) - base
                if lo < base:
                    raise _NotRebindable("an array starts before its allocation")
                spans[j][0] = max(spans[j][0], hi - base)
                if offset == 0 and a.flags.c_contiguous and hi - base == spans[j][0]:
                    spans[j][1] = (a.shape, a.dtype)
                src = Source(("temp", j, offset, a.shape, a.dtype, a.strides))
            return Source((numbers.setdefault(src, len(numbers)),))

        templates = [StepTemplate(step, source) for step in steps]
        self.exports = [[(name, ("array", source(v.data)[0], v.device) if isinstance(v, Tensor) else ("value", v))
                         for name, v in vars(h).items()] for h in holders]
        self.sources = sorted(numbers, key=numbers.get)
        # Allocate each as the array that fills it where there is one (that array is then the
        # allocation itself, no view to make), else as bytes.
        self.temps = [(filled if filled is not None and filled[1].itemsize * math.prod(filled[0]) >= size
                       else ((size,), np.dtype(np.uint8))) for size, filled in spans]
        self.builders = [t.compile() for t in templates]
        self.replays = graph_replay.Replays(backend) if backend.graphs else None

    def instantiate(self, tensors, out, holders, addresses=None):
        """The recipe's steps over these arrays, with fresh temporaries; fills the result holders.
        addresses: of the tensors, to replay the steps as one CUDA graph step (lazytensor.reuse.replay)
        when the same tensors and destination were seen before."""
        backend = self.backend
        replays = self.replays
        entry = None
        if addresses is not None and replays is not None and replays.refusal is None and graph_replay.ENABLED:
            entry = replays.step_for((backend.current_device(), address(out), *addresses))
            if entry is not None and entry.graph is not None:
                if entry.hand_out(holders):         # the graph's results are free: it writes them again
                    return [entry]
                entry = None                        # still held by the caller: fresh ones, step by step
        fresh = [backend.empty(shape, dtype) for shape, dtype in self.temps]
        arrays = [self._array(src, tensors, out, fresh) for src in self.sources]
        steps = [build(arrays) for build in self.builders]
        self._export(holders, arrays)
        if entry is not None:                       # the second call over these arrays: capture
            entry.prepare(steps, fresh, holders, [[(name, getattr(h, name)) for name, _ in exports]
                                                  for h, exports in zip(holders, self.exports)])
            return [entry]
        return steps

    def _array(self, src, tensors, out, fresh):
        kind = src[0]
        if kind == "tensor":
            return tensors[src[1]]
        if kind == "out":
            return out
        if kind == "within":                # a view inside tensor i, at the same place in the new one
            _, i, offset, shape, dtype, strides = src
            return self.backend.view(tensors[i], offset, shape, dtype, strides)
        _, j, offset, shape, dtype, strides = src
        base = fresh[j]
        if offset == 0 and shape == base.shape and strides == base.strides and dtype == base.dtype:
            return base
        return self.backend.view(base, offset, shape, dtype, strides)

    def _export(self, holders, arrays):
        for holder, exports in zip(holders, self.exports):
            for name, (kind, v, *device) in exports:
                setattr(holder, name, Tensor(arrays[v], device[0]) if kind == "array" else v)


class _NotRebindable(Exception):
    pass


class StepTemplate:
    """One step of a recipe: its class and its slots, with numbered Sources where it held arrays."""
    __slots__ = ("cls", "fields")

    def __init__(self, step, f):
        self.cls = cls = type(step)
        reset = getattr(cls, "per_arrays", ())
        self.fields = tuple((name, None if name in reset else _mapped(getattr(step, name), f))
                            for name in _slots(cls))

    def compile(self):
        """build(arrays) -> the step over arrays[k] for Source (k,): straight-line code, as a step
        is rebuilt on every call of a training loop."""
        env = {"new": self.cls.__new__, "cls": self.cls}
        lines = ["def build(arrays):", "    s = new(cls)"]
        for name, v in self.fields:
            lines.append(f"    s.{name} = {_code(v, env)}")
        lines.append("    return s")
        exec("\n".join(lines), env)
        return env["build"]


def _code(v, env) -> str:
    """Python source for `v` with its Sources read from `arrays` and nested steps built."""
    t = type(v)
    if t is Source:
        return f"arrays[{v[0]}]"
    if t is StepTemplate:
        name = f"step{len(env)}"
        env[name] = v.compile()
        return f"{name}(arrays)"
    if (t is list or t is tuple) and _holds_source(v):
        items = ", ".join(_code(x, env) for x in v)
        return f"[{items}]" if t is list else f"({items},)"
    if t is list:
        name = f"c{len(env)}"
        env[name] = v
        return f"list({name})"          # a fresh list per step: a step may keep and change its own
    name = f"c{len(env)}"
    env[name] = v
    return name


def _mapped(v, f):
    """`v` with each array mapped by `f`, through lists, tuples and nested steps (a fallback path)."""
    t = type(v)
    if t is list:
        return [_mapped(x, f) for x in v]
    if t is tuple:
        return tuple(_mapped(x, f) for x in v)
    if _is_array(v):
        return f(v)
    if hasattr(t, "__slots__") and hasattr(v, "run") and hasattr(v, "describe"):
        return StepTemplate(v, f)
    return v


def _holds_source(v) -> bool:
    t = type(v)
    if t is Source or t is StepTemplate:
        return True
    if t is list or t is tuple:
        return any(_holds_source(x) for x in v)
    return False


@functools.lru_cache(maxsize=None)
def _slots(cls) -> tuple:
    names = []
    for c in reversed(cls.__mro__):
        s = c.__dict__.get("__slots__", ())
        names.extend((s,) if isinstance(s, str) else s)
    return tuple(n for n in names if n != "__weakref__")


def kept(key):
    """The recipe kept under `key`: a Recipe, PLAN_EACH_TIME (its plan is made on every call), or None.
    Raises TypeError where the key holds an attribute that cannot be hashed."""
    return _recipes.get(key)


def keep(key, steps, arrays, out, holders, backend):
    """-> the recipe of `steps` (a plan over `arrays` into `out`, which may be one of them, filling
    `holders`), kept under `key` for later calls; PLAN_EACH_TIME where the steps cannot be rebound."""
    try:
        recipe = Recipe(steps, arrays, out, holders, backend)
    except _NotRebindable:
        recipe = PLAN_EACH_TIME         # remembered, so the attempt is not repeated on every call
    make_room(_recipes, _MAX_RECIPES, _release)
    _recipes[key] = recipe
    return recipe


def planned(root, out, backend, make_plan, replay=False):
    """make_plan(root, out, backend), or the rebound recipe of an earlier plan of the same signature
    (replay: or its CUDA graph, where the same addresses were seen before)."""
    sig = signature(root, out)
    if sig is None:
        return make_plan(root, out, backend)
    key, tensors, holders, addresses = sig
    try:
        recipe = kept(key)
    except TypeError:                   # an attribute that cannot be hashed: plan every time
        return make_plan(root, out, backend)
    if recipe is not None:
        if recipe is PLAN_EACH_TIME:
            return make_plan(root, out, backend)
        return recipe.instantiate(tensors, out, holders, addresses if replay else None)
    steps = make_plan(root, out, backend)
    keep(key, steps, tensors, out, holders, backend)
    return steps


def cache_note(key) -> str:
    """What lt.explain says of the plan cache for the recipe key `key` (or None: no key, the
    destination's memory is read), looked up before the plan explain makes is kept."""
    if key is None:
        return ("plan cache: none (the expression reads the destination's memory, so its plan depends on "
                "addresses: made on every call)")
    try:
        recipe = kept(key)
    except TypeError:
        return "plan cache: none (an attribute of the expression cannot be hashed: planned on every call)"
    if recipe is PLAN_EACH_TIME:
        return "plan cache: none (a step holds a view of an input or of a destination: planned on every call)"
    if recipe is not None:
        return ("plan cache: hit (an earlier call kept the plan of this structure: an assignment of it "
                "rebinds those steps to its tensors, with no planning)")
    return (f"plan cache: miss ({miss_reason(key, list(_recipes))}); the first call of this structure "
            "plans and keeps it, later calls rebind it")


def replay_note(root, out, backend, steps) -> str | None:
    """What lt.explain says about CUDA graph replay of `steps`, the plan of `root` into `out`; None
    where the backend has no graphs or the expression is one kernel anyway. The plan explain made
    is kept as assigning `root` into `out` would keep it (lazytensor.assign.plans), where none is."""
    if not root.heavy:
        return None
    recipe = _kept_as_assigned(root, out, backend, steps)
    if not backend.graphs:
        return None
    head = "CUDA graph replay: "
    if not graph_replay.ENABLED:
        return head + "off (LAZYTENSOR_CUDA_GRAPHS=0)"
    if recipe is None or recipe is PLAN_EACH_TIME:
        return head + "not used: this plan is made afresh on every call (its destination or a step's view shares memory with an input)"
    replays = recipe.replays
    reason = replays.refusal or graph_replay.first_refusal(steps)
    if reason is not None:
        return head + f"not used: {reason}"
    return (head + "the third call over the same tensors and destination (the first plans, the second runs the "
            "recipe and notes their addresses) captures these steps into one CUDA graph, which keeps that call's "
            "temporaries; later such calls launch only the graph, and hand out "
            "its results again once the caller no longer holds the previous ones (" + replays.describe() + ")")


def _kept_as_assigned(root, out, backend, steps):
    """The recipe of `steps`, the plan of the heavy `root` into `out`, kept under its signature if
    none is; None where assignment keeps none: a signature that cannot be hashed or is none, or the
    reduction written straight into the destination that is planned on every call."""
    if (root.op == "reduce" and not root.args[0].heavy and not backend.graphs and len(steps) == 1
            and getattr(steps[0], "spec", None) is root.attrs and getattr(steps[0], "out", None) is out):
        return None
    sig = signature(root, out)
    if sig is None:
        return None
    try:
        recipe = kept(sig[0])
    except TypeError:
        return None
    return keep(sig[0], steps, sig[1], out, sig[2], backend) if recipe is None else recipe


def _release(recipe) -> None:
    replays = getattr(recipe, "replays", None)
    if replays is not None:
        replays.release()


def clear() -> None:
    for recipe in list(_recipes.values()):
        _release(recipe)
    _recipes.clear()


# A change of lt.config (TF32, allow_host) drops the kept plans: their steps baked the old switches in.
config.on_change(clear)


def count() -> int:
    """Recipes kept (signatures planned every time not counted)."""
    return sum(r is not PLAN_EACH_TIME for r in _recipes.values())

