"""Hypothesis strategies for lazytensor, built on hypothesis.extra.numpy.

Design: docs/design/testing.md, section "lazytensor/testing/strategies.py".
"""
from __future__ import annotations

try:
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
except ImportError as exc:      # hypothesis is optional: the assertions work without it
    raise ImportError("lazytensor.testing's strategies need hypothesis: pip install 'lazytensor[test]' "
                      "(or pip install hypothesis)") from exc

import numpy as np

from lazytensor.core.tensor import Tensor, asarray
from lazytensor.kernels.ops import DTYPES, OPS
from lazytensor.testing.oracle import (BINARY_OPS, BOOL, SHAPES, UNARY_OPS, DrawnDag, Node, Refused, build,
                                       build_astype, build_clip)

LAYOUTS = ("contiguous", "strided", "reversed")
# Ops `expressions` draws besides the op table's: np.clip and astype.
EXTRA_OPS = ("clip", "astype")
ALL_OPS = tuple(OPS) + EXTRA_OPS


# ---------------------------------------------------------------------------------------------------
# values


def float_specials(dtype) -> list:
    fi = np.finfo(dtype)
    return [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, float(fi.max), float(fi.min),
            float(fi.tiny), float(fi.smallest_subnormal), -float(fi.smallest_subnormal), 3.0, 1e-3]


def int_specials(dtype) -> list:
    ii = np.iinfo(dtype)
    return sorted({ii.min, ii.max, 0, 1, 2, 3, 7, ii.max - 1, ii.min + 1} | ({-1, -2, -7} if ii.min < 0 else set()))


def elements(dtype):
    """Values of `dtype` that find bugs: the special values above (NaN, +-inf, -0.0, subnormals,
    the extremes), small numbers, and anything else the dtype holds."""
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return st.booleans()
    if dtype.kind in "iu":
        ii = np.iinfo(dtype)
        return st.one_of(st.sampled_from(int_specials(dtype)), st.integers(max(ii.min, -20), min(ii.max, 20)),
                         st.integers(ii.min, ii.max))
    width = dtype.itemsize * 8
    return st.one_of(st.sampled_from(float_specials(dtype)).map(lambda v: dtype.type(v)),
                     st.floats(-10, 10, width=width),
                     st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True))


def python_scalars():
    """Weak scalars: Python int (including out-of-range values, which must raise OverflowError
    exactly where NumPy raises it, and ints beyond 64 bits, which integers still compare with),
    Python float, Python bool."""
    return st.one_of(
        st.sampled_from([0, 1, -1, 2, 3, 5, 127, 128, 255, 256, -129, 300, 65535, 2**31 - 1, 2**31,
                         2**63 - 1, -2**63, 2**64 - 1, -2**63 - 1, 2**64, 2**100]),
        st.integers(-50, 50),
        st.sampled_from([0.0, -0.0, 0.5, 2.5, -1.5, np.nan, np.inf, -np.inf, 1e-3, 1e30, 70000.0]),
        st.floats(-100, 100),
        st.booleans(),
    )


@st.composite
def numpy_scalars(draw, dtypes=DTYPES):
    """Strong scalars: NumPy scalars of any supported dtype."""
    dtype = draw(st.sampled_from(dtypes))
    return dtype.type(draw(elements(dtype)))


def scalars(dtypes=DTYPES):
    return st.one_of(python_scalars(), numpy_scalars(dtypes))


# ---------------------------------------------------------------------------------------------------
# shapes and tensors


def _strategy(value, default):
    """A strategy as it is, a plain value as the strategy that always draws it, None as `default`."""
    if value is None:
        return default
    return value if isinstance(value, st.SearchStrategy) else st.just(value)


@st.composite
def broadcastable_shapes(draw, shape):
    """Shapes that broadcast to `shape` (a tuple, or a strategy of tuples) and to nothing larger:
    leading dims dropped, some dims turned into 1. (hypothesis.extra.numpy.broadcastable_shapes
    draws shapes that broadcast *with* a shape, possibly to a larger one.)"""
    out_shape = tuple(draw(_strategy(shape, None)))
    drop = draw(st.integers(0, len(out_shape)))
    result = list(out_shape[drop:])
    for i in range(len(result)):
        if draw(st.integers(0, 3)) == 0:
            result[i] = 1
    return tuple(result)


def _place(values: np.ndarray, layout: str) -> np.ndarray:
    """The same values in another memory layout: every other element of a wider buffer, or
    negative strides."""
    if layout == "strided" and values.ndim:
        base = np.zeros(values.shape[:-1] + (2 * values.shape[-1],), values.dtype)
        base[..., ::2] = values
        return base[..., ::2]
    if layout == "reversed" and values.ndim:
        return values[::-1].copy()[::-1]
    return values.copy()


@st.composite
def _tensor_and_values(draw, dtype, shape, device, elements_, layouts):
    dtype = np.dtype(draw(_strategy(dtype, st.sampled_from(DTYPES))))
    shape = draw(_strategy(shape, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6)))
    values = draw(hnp.arrays(dtype, shape, elements=elements(dtype) if elements_ is None else elements_))
    layout = draw(st.sampled_from(layouts))
    return asarray(_place(values, layout), device=device), values, layout


def tensors(dtype=None, shape=None, *, device=None, elements=None, layouts=("contiguous",)):
    """Tensors with drawn values, as hypothesis.extra.numpy.arrays draws them.

    dtype: a dtype, a strategy of dtypes, or None for any supported dtype. shape: a tuple, a
    strategy of tuples (hnp.array_shapes, broadcastable_shapes), or None for 0 to 3 dims of 0 to 6.
    device: 'cpu', 'cuda', or None for lt.default_device(). elements: a strategy of values, or None
    for the special values of `elements(dtype)` (NaN, +-inf, -0.0, subnormals, extremes).
    layouts: the memory layouts to draw from, of 'contiguous', 'strided', 'reversed'.
    `t.numpy()` gives a drawn tensor's values to compute the NumPy side with."""
    for layout in layouts:
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}: expected some of {LAYOUTS}")
    return _tensor_and_values(dtype, shape, device, elements, tuple(layouts)).map(lambda drawn: drawn[0])


@st.composite
def tensor_leaves(draw, out_shape, dtypes=DTYPES, device="cpu"):
    """A leaf of `dags`: a tensor that broadcasts to out_shape, as an oracle node."""
    tensor, values, layout = draw(_tensor_and_values(st.sampled_from(dtypes), broadcastable_shapes(out_shape),
                                                     device, None, ("contiguous", "contiguous", "strided", "reversed")))
    text = f"t[{values.dtype.name}{list(values.shape)}{'' if layout == 'contiguous' or not values.ndim else ' ' + layout}]"
    return Node(tensor, values, 0.0, text)


# ---------------------------------------------------------------------------------------------------
# expressions


def _check_ops(ops) -> tuple:
    if ops is None:
        return ALL_OPS
    ops = tuple(ops)
    unknown = [op for op in ops if op not in ALL_OPS]
    if unknown or not ops:
        raise ValueError(f"unknown ops {unknown}: expected names of the op table "
                         f"(lazytensor.kernels.ops.OPS) or {EXTRA_OPS}" if unknown else "ops is empty")
    return ops


def _grow(draw, pool, n_ops, ops, max_depth, dtypes, scalar_dtypes):
    """Apply up to n_ops random ops of `ops` to nodes of `pool` (growing it): a DrawnDag of the last."""
    unary = [op for op in UNARY_OPS if op in ops]
    binary = [op for op in BINARY_OPS if op in ops]
    kinds = (["unary"] if unary else []) + (["binary"] * 3 if binary else []) + [
        k for k in ("where", "clip", "astype") if k in ops]
    raised, built = [], []
    attempts = 0
    while len(built) < n_ops and attempts < 4 * n_ops:
        attempts += 1
        readable = [node for node in pool if max_depth is None or node.depth < max_depth]
        if not readable:
            break

        # Prefer recent nodes (chains grow deep) but any earlier node can be read again (sharing).
        def pick():
            i = draw(st.integers(0, len(readable) - 1))
            j = draw(st.integers(max(0, len(readable) - 2), len(readable) - 1))
            return readable[draw(st.sampled_from([i, j, j]))]

        def operand():
            return pick() if draw(st.integers(0, 3)) else draw(scalars(scalar_dtypes))

        kind = draw(st.sampled_from(kinds))
        form = draw(st.sampled_from(["operator", "function", "ufunc"]))
        try:
            if kind == "unary":
                node = build(draw(st.sampled_from(unary)), [pick()], form)
            elif kind == "binary":
                op = draw(st.sampled_from(binary))
                a, b = pick(), operand()
                if draw(st.booleans()):
                    a, b = b, a                  # a scalar on the left: reflected operators
                node = build(op, [a, b], form)
            elif kind == "where":
                node = build("where", [pick(), operand(), operand()], "function")
            elif kind == "clip":
                lo = operand() if draw(st.booleans()) else None
                hi = operand() if draw(st.booleans()) or lo is None else None
                node = build_clip(pick(), lo, hi)
            else:
                node = build_astype(pick(), draw(st.sampled_from(dtypes)))
        except Refused as r:
            raised.append(str(r))
            continue
        pool.append(node)
        built.append(node)
    return built, raised


@st.composite
def dags(draw, device="cpu", dtypes=DTYPES, shapes=SHAPES, max_leaves=4, max_ops=7, scalar_dtypes=DTYPES):
    """A random expression DAG over drawn leaves of `dtypes`, broadcasting to one of `shapes`, and
    its NumPy oracle (a DrawnDag). See the module docstring."""
    out_shape = draw(st.sampled_from(shapes))
    pool = [draw(tensor_leaves(out_shape, dtypes, device)) for _ in range(draw(st.integers(1, max_leaves)))]
    built, raised = _grow(draw, pool, draw(st.integers(1, max_ops)), ALL_OPS, None, dtypes, scalar_dtypes)
    if not built:                               # every op refused: a plain copy-like op still runs
        built.append(build("absolute" if pool[0].dtype != BOOL else "invert", [pool[0]], "function"))
    root = built[-1]
    return DrawnDag(root.lt, root.np, root.err, root.text, raised,
                    [DrawnDag(n.lt, n.np, n.err, n.text) for n in built])


def expressions(leaves, ops=None, max_depth=3, max_ops=6, scalar_dtypes=DTYPES, dtypes=DTYPES):
    """A random expression DAG over `leaves` and its NumPy reference: a DrawnDag with `.expr` (the
    lazytensor expression, built as a user writes it), `.expected` (NumPy's eager value of the same
    DAG), `.err` (per-element error bound), `.text` (the DAG spelled with t0, t1, ... for the leaves)
    and `.check()` (evaluate and compare).

    leaves: Tensors (a sequence, or a strategy of sequences such as st.lists(tensors(...))).
    ops: names of the op table (lazytensor.kernels.ops.OPS) and "clip", "astype"; None for all.
    max_depth: the most drawn ops on any path from a leaf to the root (casts that NumPy's promotion
    inserts are not counted). max_ops: the most ops drawn.
    Python and NumPy scalars of `scalar_dtypes` appear as operands; astype casts to `dtypes`. Ops
    that NumPy refuses (shapes that do not broadcast, ...) must be refused alike and are left out;
    an expression of which every op was refused is rejected (hypothesis draws another)."""
    ops = _check_ops(ops)
    if max_depth is not None and max_depth < 1:
        raise ValueError(f"max_depth must be at least 1 (one op over the leaves), got {max_depth}")
    if not isinstance(leaves, st.SearchStrategy):
        leaves = st.just(_check_leaves(leaves))
    return _expressions(leaves, ops, max_depth, max_ops, scalar_dtypes, dtypes)


def _check_leaves(leaves) -> list:
    leaves = list(leaves)
    if not leaves or not all(isinstance(t, Tensor) for t in leaves):
        raise TypeError(f"expressions(leaves) takes a non-empty sequence of lazytensor Tensors, got {leaves!r}")
    return leaves


@st.composite
def _expressions(draw, leaves, ops, max_depth, max_ops, scalar_dtypes, dtypes):
    leaves = _check_leaves(draw(leaves))
    pool = [Node(t, t.numpy(), 0.0, f"t{i}") for i, t in enumerate(leaves)]
    built, raised = _grow(draw, pool, draw(st.integers(1, max_ops)), ops, max_depth, dtypes, scalar_dtypes)
    if not built:
        from hypothesis import reject
        reject()
    root = built[-1]
    return DrawnDag(root.lt, root.np, root.err, root.text, raised)
