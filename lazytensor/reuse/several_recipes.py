"""Recipes of several results: the plan of a simultaneous assignment made once per structure.

Design: docs/design/caches.md, section "lazytensor/reuse/several_recipes.py".
"""
from __future__ import annotations

from lazytensor.core.expr import Const
from lazytensor.core.memory import address, owner
from lazytensor.core.tensor import Tensor
from lazytensor.reuse import recipes
from lazytensor.reuse import replay as graph_replay
from lazytensor.plan.several import plan_several

# Planner runs for several results, counted for tests (a recipe hit makes none).
plans_made = [0]


def _layout(a) -> tuple:
    return (a.dtype, a.shape, a.strides, recipes.place(a), address(a) & 15)


def signature_several(pairs):
    """-> (key, arrays, holders, addresses) of the pairs [(destination array, expression)], where
    arrays are the expressions' tensors' arrays, then the destinations. A key holding an attribute
    that cannot be hashed raises TypeError when looked up (the plan is then made every time)."""
    dests: dict = {}                # id(owner) -> (destination index, its address)
    outs = []
    for k, (out, _) in enumerate(pairs):
        at = address(out)
        first = dests.setdefault(id(owner(out)), (k, at))
        outs.append((_layout(out), type(out), first[0], at - first[1]))
    parts, roots, tensors, holders, addresses = walk([root for _, root in pairs], dests)
    key = ("several", parts, roots, tuple(outs))
    arrays = tensors + [out for out, _ in pairs]
    return key, arrays, holders, addresses + [address(out) for out, _ in pairs]


def walk(roots, dests) -> tuple:
    """The structure of the expressions `roots` (Tensors among them) in one numbering:
    (parts, each root's position, the tensors' arrays, result holders, the arrays' addresses).
    dests: id(owner) -> (index, address) of the destinations, which a tensor read is placed against."""
    index: dict = {}                # id(node) -> position in `parts`
    parts: list = []
    tensors: list = []
    addresses: list = []
    holders: list = []
    owners: dict = {}               # id(owner) -> index of the first tensor in it
    consts: dict = {}               # a Const's part -> its position
    positions = []
    for root in roots:
        stack = [root]
        while stack:
            node = stack[-1]
            if id(node) in index:
                stack.pop()
                continue
            t = type(node)
            if t is Tensor:
                a = node.data
                part, own, at = recipes.tensor_layout(node)
                dest = dests.get(own)
                if dest is not None:        # read where a destination is written: its place matters
                    part = (part, "dest", dest[0], at - dest[1])
                else:
                    part = (part, owners.setdefault(own, len(tensors)))
                tensors.append(a)
                addresses.append(at)
            elif t is Const:
                part = recipes.const_part(node)
                known = consts.get(part)
                if known is not None:       # equal scalars plan alike, one object or several
                    stack.pop()
                    index[id(node)] = known
                    continue
                consts[part] = len(parts)
            elif not node.heavy and not node.shared and len(set(node.leaves)) == len(node.leaves):
                # An elementwise tree over distinct tensors is its structure id, its scalars and its
                # tensors (as lowering finds its program): no walk inside it.
                pending = [a for a in node.leaves if id(a) not in index]
                if pending:                 # its tensors first; then this node again
                    pending.reverse()
                    stack.extend(pending)
                    continue
                part = ("S", node.skey, tuple([recipes.scalar_key(v) for v in node.scalars]),
                        tuple([index[id(a)] for a in node.leaves]))
            else:
                pending = [a for a in node.args if id(a) not in index]
                if pending:                 # operands first, left to right; then this node again
                    pending.reverse()
                    stack.extend(pending)
                    continue
                attrs = node.attrs
                holder = getattr(attrs, "saved", None)
                if holder is not None:
                    holders.append(holder)
                    attrs = attrs.structure
                part = ("E", node.op, node.dtype, node.shape, attrs, tuple([index[id(a)] for a in node.args]))
            stack.pop()
            index[id(node)] = len(parts)
            parts.append(part)
        positions.append(index[id(root)])
    return tuple(parts), tuple(positions), tensors, holders, addresses


def _make(pairs, backend) -> list:
    plans_made[0] += 1
    return plan_several(pairs, backend)


def planned_several(pairs, backend, replay: bool = True) -> list:
    """plan_several(pairs, backend), or the rebound recipe of an earlier plan of the same signature
    (replay: or its CUDA graph, where the same addresses were seen before and a result is heavy)."""
    key, arrays, holders, addresses = signature_several(pairs)
    try:
        recipe = recipes.kept(key)
    except TypeError:                   # an attribute that cannot be hashed: plan every time
        return _make(pairs, backend)
    if recipe is not None:
        if recipe is recipes.PLAN_EACH_TIME:
            return _make(pairs, backend)
        heavy = replay and any(node.heavy for _, node in pairs)
        return recipe.instantiate(arrays, pairs[0][0], holders, addresses if heavy else None)
    steps = _make(pairs, backend)
    # The destinations are among the arrays (after the tensors), so each rebinds to its place;
    # the first is also the Recipe's `out`.
    recipes.keep(key, steps, arrays, pairs[0][0], holders, backend)
    return steps


def recipe_note(pairs, backend, steps) -> str:
    """What lt.explain says about the recipe of several results and its CUDA graph replay."""
    sig = signature_several(pairs)
    cache = recipes.cache_note(sig[0])
    try:
        recipe = recipes.kept(sig[0])
    except TypeError:
        return cache
    if recipe is recipes.PLAN_EACH_TIME:
        return cache
    text = (cache + "\nrecipe: kept after the first call (the next call with the same structure rebinds these steps "
            "to its arrays without planning)")
    if not backend.graphs or not any(node.heavy for _, node in pairs):
        return text
    head = "\nCUDA graph replay: "
    if not graph_replay.ENABLED:
        return text + head + "off (LAZYTENSOR_CUDA_GRAPHS=0)"
    reason = (recipe.replays.refusal if recipe is not None else None) or graph_replay.first_refusal(steps)
    if reason is not None:
        return text + head + f"not used: {reason}"
    return text + head + ("the third call over the same tensors and destinations (the first plans, the second runs the recipe and notes their addresses) captures these steps into one "
                          "CUDA graph; later such calls launch only the graph"
                          + (f" ({recipe.replays.describe()})" if recipe is not None else ""))
