"""Aliasing: the destination read through another index map must give NumPy's result.

NumPy evaluates the right side into a new array before it writes (`c[dst] = f(c[src])`), so the
oracle is NumPy doing exactly that on a copy. lazytensor must detect the overlap and evaluate
through a temporary; where the destination is read only at the index it writes (`a[...] = a * 2 + b`)
it must stay one in-place kernel. Values are compared exactly (the expressions are exact in float64).
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _array(shape, seed=0):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float64) * 1.25 + seed).reshape(shape)


def _steps(expr, out):
    text = lt.explain(expr, out=out, source=False)
    return int(text.split("plan: ", 1)[1].split(" step", 1)[0]), text


def test_transpose_of_the_destination():
    x = _array((5, 5))
    a = lt.asarray(x.copy())
    a[...] = a.T + 1
    x[...] = x.T + 1
    np.testing.assert_array_equal(a.numpy(), x)
    n, text = _steps(a.T + 1, a)
    assert n == 2 and "another index map" in text, text


def test_shifted_slices():
    x = _array(10)
    a = lt.asarray(x.copy())
    a[1:] = a[:-1] * 2
    x[1:] = x[:-1] * 2
    np.testing.assert_array_equal(a.numpy(), x)
    a[:-1] = a[1:] - a[:-1]                     # a read twice: once shifted, once at the written index
    x[:-1] = x[1:] - x[:-1]
    np.testing.assert_array_equal(a.numpy(), x)


def test_reversed_copy_of_itself():
    x = _array(9)
    a = lt.asarray(x.copy())
    a[::-1] = a
    x[::-1] = x.copy()
    np.testing.assert_array_equal(a.numpy(), x)
    m = _array((4, 6))
    b = lt.asarray(m.copy())
    b[::-1, ::-1] = b
    m[::-1, ::-1] = m.copy()
    np.testing.assert_array_equal(b.numpy(), m)


def test_same_index_map_stays_one_in_place_kernel():
    x, y = _array((7, 9)), _array((7, 9), 3)
    a, b = lt.asarray(x.copy()), lt.asarray(y)
    data = a.data
    n, text = _steps(a * 2 + b, a)      # (an expression held across the write would be evaluated first)
    assert n == 1 and "temporary" not in text, text
    with lt.profile() as p:
        a[...] = a * 2 + b
    assert p.launches == 1, p
    assert a.data is data
    np.testing.assert_array_equal(a.numpy(), x * 2 + y)
    with lt.profile() as p:
        a += b * a                               # in-place operator, same index map
    assert p.launches == 1
    np.testing.assert_array_equal(a.numpy(), (x * 2 + y) + y * (x * 2 + y))
    v = a[1:, ::2]                              # a view read and written at the same index
    before = a.numpy().copy()
    with lt.profile() as p:
        v[...] = v * 2 + 1
    assert p.launches == 1
    before[1:, ::2] = before[1:, ::2] * 2 + 1
    np.testing.assert_array_equal(a.numpy(), before)


def test_reshape_view_of_the_destination():
    """A reshape view (built by as_strided) of the destination is still seen as the destination."""
    x = _array((4, 4))
    a = lt.asarray(x.copy())
    a[...] = a.reshape(16)[::-1].reshape(4, 4) + 0
    x[...] = x.reshape(16)[::-1].reshape(4, 4) + 0
    np.testing.assert_array_equal(a.numpy(), x)
    flat = a.reshape(16)
    flat[2:] = a.reshape(16)[:-2] * 3
    x.reshape(16)[2:] = x.reshape(16)[:-2] * 3
    np.testing.assert_array_equal(a.numpy(), x)


def test_reductions_of_the_destination():
    x = _array((4, 5))
    a = lt.asarray(x.copy())
    a[0] = a.sum(axis=0)
    x[0] = x.sum(axis=0)
    np.testing.assert_array_equal(a.numpy(), x)
    a[...] = a - a.mean(axis=0)
    x[...] = x - x.mean(axis=0)
    np.testing.assert_allclose(a.numpy(), x, rtol=0, atol=1e-12)
    a[:, 1] = a.max(axis=1) + a[:, 0]
    x[:, 1] = x.max(axis=1) + x[:, 0]
    np.testing.assert_array_equal(a.numpy(), x)


def test_expression_view_reads_the_destination_shifted():
    x, y = _array(12), _array(12, 5)
    a, b = lt.asarray(x.copy()), lt.asarray(y)
    a[2:] = (a * 2 + b)[:-2]                    # the view is pushed to the leaves: a[:-2] is read
    x[2:] = (x * 2 + y)[:-2]
    np.testing.assert_array_equal(a.numpy(), x)


# -- hypothesis: random overlapping slices -----------------------------------------------------------

def _slices_of_length(n, length):
    """All slices of range(n) (steps of either sign) that select `length` elements."""
    out = []
    for step in (1, 2, 3, -1, -2, -3):
        for start in range(n):
            s = slice(start, None, step)
            if len(range(n)[s]) >= length:
                stop = start + step * length
                out.append(slice(start, stop if stop >= 0 else None, step))
    return out


@st.composite
def overlapping_pair(draw, n):
    """A destination slice and a source slice of range(n) with equally many elements."""
    dst = slice(draw(st.one_of(st.none(), st.integers(-n, n))), draw(st.one_of(st.none(), st.integers(-n, n))),
                draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3])))
    length = len(range(n)[dst])
    candidates = _slices_of_length(n, length) if length else [slice(0, 0)]
    return dst, draw(st.sampled_from(candidates))


FUNCTIONS = {
    "copy": (lambda s, d: s, lambda s, d: s.copy()),
    "affine": (lambda s, d: s * 2 + 1, lambda s, d: s * 2 + 1),
    "with dst": (lambda s, d: s - d * 0.5, lambda s, d: s - d * 0.5),
    "sqrt": (lambda s, d: lt.sqrt(s * s + 1), lambda s, d: np.sqrt(s * s + 1)),
}


@SETTINGS
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), overlapping_pair(n))),
       st.sampled_from(sorted(FUNCTIONS)))
def test_drawn_overlapping_slices_1d(case, fname):
    n, (dst, src) = case
    f_lt, f_np = FUNCTIONS[fname]
    x = _array(n) - 4
    a = lt.asarray(x.copy())
    a[dst] = f_lt(a[src], a[dst])
    c = x.copy()
    c[dst] = f_np(c[src], c[dst])
    np.testing.assert_array_equal(a.numpy(), c, err_msg=f"a[{dst}] = {fname}(a[{src}])")


@st.composite
def overlapping_2d(draw):
    r, c = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    d0, s0 = draw(overlapping_pair(r))
    d1, s1 = draw(overlapping_pair(c))
    transpose_src = draw(st.booleans()) and r == c
    return (r, c), (d0, d1), (s0, s1), transpose_src


@SETTINGS
@given(overlapping_2d(), st.sampled_from(sorted(FUNCTIONS)))
def test_drawn_overlapping_slices_2d(case, fname):
    shape, dst, src, transpose_src = case
    f_lt, f_np = FUNCTIONS[fname]
    x = _array(shape) - 7
    a = lt.asarray(x.copy())
    c = x.copy()
    a_src, c_src = (a.T, c.T) if transpose_src else (a, c)
    a[dst] = f_lt(a_src[src], a[dst])
    c[dst] = f_np(c_src[src], c[dst])
    np.testing.assert_array_equal(a.numpy(), c, err_msg=f"a[{dst}] = {fname}(a{'.T' if transpose_src else ''}[{src}])")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 6), st.data())
def test_drawn_views_of_a_square_matrix(n, data):
    """Destination and source are any of several views of the same square matrix."""
    views = {
        "id": lambda m: m, "T": lambda m: m.T, "flipud": lambda m: m[::-1], "fliplr": lambda m: m[:, ::-1],
        "rot": lambda m: m.T[::-1], "anti": lambda m: m[::-1, ::-1].T,
    }
    dname, sname = data.draw(st.sampled_from(sorted(views))), data.draw(st.sampled_from(sorted(views)))
    x = _array((n, n)) * 0.5
    a = lt.asarray(x.copy())
    c = x.copy()
    views[dname](a)[...] = views[sname](a) + 1
    views[dname](c)[...] = views[sname](c) + 1
    np.testing.assert_array_equal(a.numpy(), c, err_msg=f"{dname}(a)[...] = {sname}(a) + 1")
