"""Why a program missed the plan cache: the first place where its structural key differs from the
nearest key kept, in words a user can act on (lt.explain prints it).

A key's parts list its nodes in one numbering (lazytensor.reuse.recipes.signature,
lazytensor.reuse.several_recipes.walk): tensors ("T"), scalars ("C"), heavy or shared nodes ("E")
and elementwise trees over distinct tensors ("S"). The nearest kept key is the one of the same kind
sharing the longest run of leading parts.
"""
from __future__ import annotations


def _split(key) -> tuple:
    """(kind, parts, the rest: destinations and roots) of a recipe key."""
    if type(key) is tuple and key and key[0] == "several":
        return "several", key[1], key[2:]
    return "one", key[0], key[1:]


def _common(a, b) -> int:
    n = min(len(a), len(b))
    k = 0
    while k < n and a[k] == b[k]:
        k += 1
    return k


def miss_reason(key, kept) -> str:
    """Why `key` is not among the keys `kept`: the first difference from the nearest one."""
    kind, parts, rest = _split(key)
    best, best_k = None, -1
    for other in kept:
        try:
            okind, oparts, orest = _split(other)
        except (TypeError, IndexError):
            continue
        if okind != kind:
            continue
        k = _common(parts, oparts)
        if k > best_k:
            best, best_k = (oparts, orest), k
    if best is None:
        return "the first program of its kind: no plan was kept before"
    oparts, orest = best
    if best_k < min(len(parts), len(oparts)):
        return f"node {best_k} differs from the nearest kept plan's: " + _part_difference(parts[best_k], oparts[best_k])
    if len(parts) != len(oparts):
        return (f"the program has {len(parts)} nodes, the nearest kept plan {len(oparts)} "
                f"(the same first {best_k})")
    if rest != orest:
        return "the same expressions, but " + _destination_difference(kind, rest, orest)
    return "the same structure is kept under another device or layout"


def _part_difference(new, old) -> str:
    tag, otag = _tag(new), _tag(old)
    if tag != otag:     # another node there: other ops, or other inputs (one tensor read twice, or two)
        return f"{_name(new)} here, {_name(old)} there"
    if tag == "T":
        return _tensor_difference(new, old)
    if tag == "C":
        return _scalar_difference(new, old)
    if tag == "E":
        return _node_difference(new, old)
    return _tree_difference(new, old)


def _tag(part) -> str:
    if type(part[0]) is tuple:      # a tensor: (its layout, where it is read)
        return "T"
    return part[0]


def _name(part) -> str:
    tag = _tag(part)
    named = {"T": "a tensor", "C": "a scalar", "S": "an elementwise expression"}.get(tag)
    if named is not None:
        return named
    return f"{'an' if str(part[1])[:1] in 'aeiou' else 'a'} {part[1]} node"


_TENSOR_FIELDS = (("dtype", 1), ("shape", 2), ("strides (another view or layout)", 3), ("device", 4),
                  ("address alignment", 5))


def _tensor_difference(new, old) -> str:
    layout, olayout = new[0], old[0]
    for field, i in _TENSOR_FIELDS:
        if layout[i] != olayout[i]:
            return f"a tensor's {field}: {_show(layout[i])} here, {_show(olayout[i])} there"
    return "which tensors are the same memory (aliasing between the inputs, or with a destination)"


def _scalar_difference(new, old) -> str:
    if new[1] != old[1] or new[2] is not old[2]:
        return f"a scalar's type: {new[2].__name__} ({new[1]}) here, {old[2].__name__} ({old[1]}) there"
    return f"a scalar's value (scalars are compiled in): {new[3]!r} here, {old[3]!r} there"


def _node_difference(new, old) -> str:
    _, op, dtype, shape, attrs, args = new
    _, oop, odtype, oshape, oattrs, oargs = old
    if op != oop:
        return f"op {op} here, {oop} there"
    if dtype != odtype:
        return f"the {op} node's dtype: {_show(dtype)} here, {_show(odtype)} there"
    if shape != oshape:
        return f"the {op} node's shape: {shape} here, {oshape} there"
    if attrs != oattrs:
        return f"the {op} node's parameters: {attrs!r:.120} here, {oattrs!r:.120} there"
    return f"the {op} node's operands: nodes {list(args)} here, {list(oargs)} there"


def _tree_difference(new, old) -> str:
    if new[1] != old[1]:
        return "an elementwise expression's ops, dtypes or shapes"
    if new[2] != old[2]:
        return f"an elementwise expression's scalars (compiled in): {new[2]} here, {old[2]} there"
    return f"an elementwise expression's tensors: nodes {list(new[3])} here, {list(old[3])} there"


def _destination_difference(kind, rest, orest) -> str:
    if kind == "several":
        roots, outs = rest
        oroots, oouts = orest
        if roots != oroots:
            return "other nodes are the results"
        for k, (d, od) in enumerate(zip(outs, oouts)):
            if d != od:
                return f"destination {k} differs: {_layout_words(d[0], od[0])}"
        return f"{len(outs)} destinations here, {len(oouts)} there"
    names = ("shape", "strides", "dtype", "device", "address alignment", "array type")
    for name, a, b in zip(names, rest, orest):
        if a != b:
            return f"the destination's {name}: {_show(a)} here, {_show(b)} there"
    return "the destination differs"


def _layout_words(a, b) -> str:
    for name, x, y in zip(("dtype", "shape", "strides", "device", "address alignment"), a, b):
        if x != y:
            return f"its {name}: {_show(x)} here, {_show(y)} there"
    return "which destinations share memory"


def _show(v) -> str:
    return getattr(v, "name", None) or getattr(v, "__name__", None) or repr(v)
