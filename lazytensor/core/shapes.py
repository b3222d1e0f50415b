"""Broadcasting by NumPy's rules, with NumPy's error message."""
from __future__ import annotations


def broadcast_shapes(*shapes: tuple) -> tuple:
    if len(shapes) == 2:                 # the common cases of binary operators, without a loop
        a, b = shapes
        if a == b or not b:
            return a
        if not a:
            return b
    first = shapes[0]
    if all(s == first for s in shapes):
        return first
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, d in enumerate(s):
            o = out[off + i]
            if o == 1:
                out[off + i] = d
            elif d != 1 and d != o:
                raise ValueError("cannot broadcast shapes " + " and ".join(str(tuple(x)) for x in shapes))
    return tuple(out)


def check_assignable(src: tuple, dst: tuple) -> None:
    """`dst[...] = src` needs src to broadcast to exactly dst's shape."""
    if src != dst:
        try:
            ok = broadcast_shapes(src, dst) == dst
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"cannot assign an expression of shape {src} to a destination of shape {dst}")
