"""np.einsum from nodes that exist. A label repeated within an operand takes its diagonal (a view);
a label no later operand or the output needs is summed away early (one fused reduction); two
operands contract as one matmul of their views ((batch, free, contracted) against (batch,
contracted, free)), or multiply where nothing is contracted. Operands contract in the order
np.einsum_path picks. The dtype is NumPy's promotion of the operands (or `dtype=`), kept by sums."""
from __future__ import annotations

import string

import numpy as np

from lazytensor.core.expr import apply, astype
from lazytensor.ops import reductions as _red
from lazytensor.ops.diagonals import diagonal
from lazytensor.ops.matmul import matmul
from lazytensor.ops.operands import operand
from lazytensor.ops.output import to_out
from lazytensor.ops.views import broadcast_to, reshape, transpose

_LETTERS = set(string.ascii_letters)


def einsum(*operands, out=None, dtype=None, order="K", casting="safe", optimize=False):
    """np.einsum with subscripts ('ij,jk->ik', implicit output, '...') or NumPy's sublist form
    (einsum(a, [0, 1], b, [1, 2], [0, 2]))."""
    subscripts, arrays = _subscripts(operands)
    arrays = [operand(x) for x in arrays]
    inputs, output = _parse(subscripts, [x.ndim for x in arrays])
    want = np.result_type(*(x.dtype for x in arrays)) if dtype is None else np.dtype(dtype)
    if dtype is not None:
        for x in arrays:
            if not np.can_cast(x.dtype, want, casting=casting):
                raise TypeError(f"Cannot cast array data from {x.dtype!r} to {want!r} according to the rule "
                                f"{casting!r}")
    sizes = {}
    for labels, x in zip(inputs, arrays):
        for label, size in zip(labels, x.shape):
            if sizes.get(label, 1) not in (1, size) and size != 1:
                raise ValueError(f"einsum: size of label {label!r} is {size} in one operand and "
                                 f"{sizes[label]} in another")
            sizes[label] = size if sizes.get(label, 1) == 1 else sizes[label]
    terms = [_diagonals(astype(x, want), list(labels)) for x, labels in zip(arrays, inputs)]
    for a, b in _path(subscripts, arrays, len(terms)):
        later = [lab for k, (_, labs) in enumerate(terms) if k not in (a, b) for lab in labs]
        keep = set(output) | set(later)
        combined = _contract(terms[a], terms[b], keep, sizes, want)
        terms = [t for k, t in enumerate(terms) if k not in (a, b)] + [combined]
    (x, labels), = terms
    x, labels = _sum_away(x, labels, set(output), want)
    x = transpose(x, tuple(labels.index(lab) for lab in output)) if labels else x
    shape = tuple(sizes[lab] for lab in output)
    if tuple(x.shape) != shape:
        x = broadcast_to(x, shape)
    return to_out(x, out)


def _subscripts(operands):
    if operands and isinstance(operands[0], str):
        return operands[0].replace(" ", ""), list(operands[1:])
    # The sublist form: operand, sublist, operand, sublist, ..., [output sublist].
    arrays, parts = [], []
    items = list(operands)
    while len(items) >= 2:
        arrays.append(items.pop(0))
        parts.append(_letters(items.pop(0)))
    text = ",".join(parts)
    if items:
        text += "->" + _letters(items[0])
    return text, arrays


def _letters(sublist) -> str:
    out = []
    for s in sublist:
        if s is Ellipsis:
            out.append("...")
        else:
            i = int(s)
            if not 0 <= i < 52:
                raise ValueError(f"einsum: subscript {i} is not within [0, 52)")
            out.append(string.ascii_letters[i])
    return "".join(out)


def _parse(subscripts, ndims):
    """Each operand's labels and the output's, with '...' spelled out as labels of its own."""
    text, arrow, result = subscripts.partition("->")
    parts = text.split(",")
    if len(parts) != len(ndims):
        raise ValueError(f"einsum: {len(parts)} operands in the subscripts, {len(ndims)} given")
    widest = 0
    for part, nd in zip(parts, ndims):
        _check_letters(part)
        if "..." in part:
            widest = max(widest, nd - len(part.replace("...", "")))
    spread = [f"\x00{i}" for i in range(widest)]
    inputs = []
    for part, nd in zip(parts, ndims):
        head, dots, tail = part.partition("...")
        width = nd - len(head) - len(tail)
        if (dots and width < 0) or (not dots and width != 0):
            raise ValueError(f"einsum: subscripts {part!r} for an operand of {nd} dimensions")
        inputs.append(list(head) + (spread[widest - width:] if dots else []) + list(tail))
    if arrow:
        _check_letters(result)
        head, dots, tail = result.partition("...")
        output = list(head) + (spread if dots else []) + list(tail)
        for lab in output:
            if not any(lab in labels for labels in inputs):
                raise ValueError(f"einsum: output subscript {lab!r} is in no operand")
        if len(set(output)) != len(output):
            raise ValueError("einsum: an output subscript appears more than once")
    else:
        counts = {}
        for labels in inputs:
            for lab in labels:
                counts[lab] = counts.get(lab, 0) + 1
        output = spread + sorted(lab for lab, n in counts.items() if n == 1 and lab in _LETTERS)
    return inputs, output


def _check_letters(part):
    if any(c not in _LETTERS for c in part.replace("...", "")):
        raise ValueError(f"einsum: invalid subscript in {part!r}: subscripts are letters and '...'")


def _diagonals(x, labels):
    """A label repeated within one operand: its diagonal, as the last axis."""
    while len(set(labels)) != len(labels):
        lab = next(lab for lab in labels if labels.count(lab) > 1)
        i = labels.index(lab)
        j = labels.index(lab, i + 1)
        x = diagonal(x, 0, i, j)
        labels = [m for k, m in enumerate(labels) if k not in (i, j)] + [lab]
    return x, labels


def _sum_away(x, labels, keep, dtype):
    gone = tuple(i for i, lab in enumerate(labels) if lab not in keep)
    if not gone:
        return x, labels
    return _red.reduce("sum", x, gone, False, dtype), [lab for lab in labels if lab in keep]


def _contract(a_term, b_term, keep, sizes, dtype):
    """Two operands as one: labels that neither `keep` nor the other needs summed first."""
    (a, la), (b, lb) = a_term, b_term
    a, la = _sum_away(a, la, keep | set(lb), dtype)
    b, lb = _sum_away(b, lb, keep | set(la), dtype)
    both = [lab for lab in la if lab in lb]
    batch = [lab for lab in both if lab in keep]
    summed = [lab for lab in both if lab not in keep]
    a_free = [lab for lab in la if lab not in lb]
    b_free = [lab for lab in lb if lab not in la]
    if not summed:
        # Nothing contracted: a broadcast product over the union of labels.
        labels = batch + a_free + b_free
        return (apply("multiply", _aligned(a, la, labels), _aligned(b, lb, labels)), labels)
    for lab in summed:          # a unit axis broadcasts against the other operand's, as NumPy's
        i, j = la.index(lab), lb.index(lab)
        if a.shape[i] == 1 and b.shape[j] != 1:
            a = broadcast_to(a, tuple(b.shape[j] if k == i else d for k, d in enumerate(a.shape)))
        elif b.shape[j] == 1 and a.shape[i] != 1:
            b = broadcast_to(b, tuple(a.shape[i] if k == j else d for k, d in enumerate(b.shape)))
    a_sizes = [a.shape[la.index(lab)] for lab in a_free]
    b_sizes = [b.shape[lb.index(lab)] for lab in b_free]
    k = int(np.prod([sizes[lab] for lab in summed]))
    m, n = int(np.prod(a_sizes)), int(np.prod(b_sizes))
    a_batch = tuple(a.shape[la.index(lab)] for lab in batch)
    b_batch = tuple(b.shape[lb.index(lab)] for lab in batch)
    a2 = reshape(transpose(a, tuple(la.index(lab) for lab in batch + a_free + summed)), a_batch + (m, k))
    b2 = reshape(transpose(b, tuple(lb.index(lab) for lab in batch + summed + b_free)), b_batch + (k, n))
    product = matmul(a2, b2)
    if product.dtype != dtype:
        product = astype(product, dtype)
    shape = tuple(product.shape[:len(batch)]) + tuple(a_sizes) + tuple(b_sizes)
    return reshape(product, shape), batch + a_free + b_free


def _aligned(x, labels, order):
    """x with its axes in `order` (labels it lacks as unit axes), for a broadcast product."""
    present = [lab for lab in order if lab in labels]
    x = transpose(x, tuple(labels.index(lab) for lab in present)) if present else x
    return reshape(x, tuple(x.shape[present.index(lab)] if lab in present else 1 for lab in order))


def _path(subscripts, arrays, count):
    """The pairs to contract, in np.einsum_path's greedy order (positions in the shrinking list,
    each result appended at the end, as NumPy's path lists them)."""
    if count < 2:
        return []
    if count == 2:
        return [(0, 1)]
    shapes = [np.broadcast_to(np.empty((), np.float64), x.shape) for x in arrays]
    path, _ = np.einsum_path(subscripts, *shapes, optimize="greedy")
    return [tuple(sorted(step)) for step in path[1:]]
