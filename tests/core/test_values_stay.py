"""Values stay values: an expression's value is the one its tensors had when it was built.

A write to a tensor or any view of it (an in-place operator, an assignment into it, np.add(...,
out=t)) must not change an expression built before the write; the NumPy conversions copy where
NumPy copies. The oracle is NumPy computing every line eagerly, as the same program would in
NumPy. Values are small integers in float64, so every result is exact.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt


def _cpu(a):
    return lt.asarray(np.array(a), device="cpu")


# -- the reproducers ---------------------------------------------------------------------

@pytest.mark.parametrize("convert", [np.array, lambda t: np.array(t, copy=True), lambda t: t.numpy(),
                                     lambda t: lt.evaluate(t).numpy(), lambda t: t.eval().numpy(),
                                     lambda t: copy.copy(t).numpy(), lambda t: copy.deepcopy(t).numpy(),
                                     lambda t: t.get()])
def test_copies_do_not_follow_later_writes(convert):
    t = _cpu(np.zeros(3, np.float32))
    snap = convert(t)
    t += 1
    np.testing.assert_array_equal(snap, np.zeros(3, np.float32))


def test_evaluate_returns_new_memory():
    t = _cpu(np.arange(4.0))
    for got in (lt.evaluate(t), t.eval(), copy.copy(t)):
        assert got is not t and not np.shares_memory(got.data, t.data)
    e = t * 2
    first, second = lt.evaluate(e), lt.evaluate(e)
    assert not np.shares_memory(first.data, second.data)
    first += 100                               # the expression's value does not follow its result
    np.testing.assert_array_equal(e.numpy(), np.arange(4.0) * 2)
    np.testing.assert_array_equal(second.numpy(), np.arange(4.0) * 2)


def test_array_protocol_copy_argument():
    t = _cpu(np.arange(3.0))
    shared = np.asarray(t)                     # copy=None: may share, as np.asarray of an array
    assert np.shares_memory(shared, t.data)
    assert np.shares_memory(np.asarray(t, copy=False), t.data)
    assert not np.shares_memory(np.array(t), t.data)
    assert np.asarray(t, dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError, match="only by a copy"):
        np.asarray(t, dtype=np.float32, copy=False)
    e = t * 2                                  # an expression: evaluated once, its result shared
    assert np.shares_memory(np.asarray(e), np.asarray(e, copy=False))
    assert not np.shares_memory(np.array(e), np.asarray(e))


def test_expression_reads_tensors_as_built():
    x = _cpu(np.array([1., 2., 3.], np.float32))
    m = x.max()
    x -= m
    assert float(m) == 3.0
    np.testing.assert_array_equal(x.numpy(), [-2., -1., 0.])
    x = _cpu(np.array([1., 2., 3.], np.float32))
    hist = []
    for _ in range(3):
        x += 1
        hist.append(x.mean())
    assert [float(h) for h in hist] == [3.0, 4.0, 5.0]


def test_explain_shows_what_a_write_evaluates_first():
    x = _cpu(np.array([1., 2., 3.]))
    m = x.max()
    text = lt.explain(x - m, out=x, source=False)
    assert "before the write: 1 live expression" in text and "max(t0" in text, text
    assert "before the write" not in lt.explain(x - m, source=False)     # a new destination


def test_gradient_descent_as_in_numpy():
    rng = np.random.default_rng(0)
    Xn = rng.standard_normal((40, 3)); yn = rng.standard_normal(40)
    wn = np.zeros(3); bn = np.zeros(()); lr = 0.1
    X, y, w, b = (_cpu(a) for a in (Xn, yn, wn, bn))
    for _ in range(3):
        err = (X * w).sum(axis=1) + b - y      # X @ w, written with sums
        gw = (X * err[:, None]).mean(axis=0)
        gb = err.mean()
        w -= lr * gw
        b -= lr * gb                           # gb is from the OLD w, as NumPy computed it
        errn = (Xn * wn).sum(axis=1) + bn - yn
        gwn = (Xn * errn[:, None]).mean(axis=0)
        gbn = errn.mean()
        wn -= lr * gwn
        bn -= lr * gbn
    np.testing.assert_allclose(w.numpy(), wn, rtol=1e-12)
    np.testing.assert_allclose(float(b), float(bn), rtol=1e-12)


@pytest.mark.parametrize("write", ["inplace", "setitem", "view", "assign", "ufunc_out", "view_of_view"])
def test_every_kind_of_write_keeps_earlier_expressions(write):
    t = _cpu(np.arange(6.0).reshape(2, 3))
    e = t * 10 + 1
    r = t.sum(axis=0)
    v = t[1] * 1                              # reads a view of t
    if write == "inplace":
        t += 5
    elif write == "setitem":
        t[...] = 7.0
    elif write == "view":
        t[1, ::2] = -1.0                      # a write through a view: same memory
    elif write == "assign":
        t.assign(t * 0)
    elif write == "ufunc_out":
        np.add(t, 1.0, out=t)
    else:
        t.T[::-1][0] *= 3
    base = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(e.numpy(), base * 10 + 1)
    np.testing.assert_array_equal(r.numpy(), base.sum(axis=0))
    np.testing.assert_array_equal(v.numpy(), base[1])


def test_a_value_that_reads_its_destination_keeps_its_value():
    t = _cpu(np.arange(4.0))
    e = t + 1
    inner = t * 2
    f = inner + t                              # `inner` is held by the user: settled before the write
    t[...] = e
    t[...] = f
    np.testing.assert_array_equal(e.numpy(), np.arange(4.0) + 1)
    np.testing.assert_array_equal(inner.numpy(), np.arange(4.0) * 2)
    np.testing.assert_array_equal(f.numpy(), np.arange(4.0) * 3)      # built before either write
    np.testing.assert_array_equal(t.numpy(), np.arange(4.0) * 3)


def test_in_place_operand_held_elsewhere_keeps_its_value():
    t = _cpu(np.arange(4.0))
    inner = t * 2                              # held: evaluated before `t += inner` writes t
    t += inner
    t += t * 3                                 # a temporary operand: no evaluation of its own
    np.testing.assert_array_equal(inner.numpy(), np.arange(4.0) * 2)
    np.testing.assert_array_equal(t.numpy(), np.arange(4.0) * 3 * 4)


def test_in_place_stays_one_kernel():
    a = _cpu(np.arange(8.0)); b = _cpu(np.ones(8))
    a[...] = a * 2 + b                        # warm the kernel
    a += a * b
    with lt.profile() as p:
        a[...] = a * 2 + b
        a += a * b                            # the operand reads a, but only this line holds it
    assert len(p.kernels) == 2


def test_numpy_operand_is_read_when_built():
    t = _cpu(np.zeros(3))
    n = np.arange(3.0)
    e = t + n
    n += 100
    np.testing.assert_array_equal(e.numpy(), np.arange(3.0))


def test_rebinding_loop_stays_one_level_deep():
    wn = np.linspace(0.5, 2.0, 16); gn = np.full(16, 0.5)
    w, g = _cpu(wn), _cpu(gn)
    launches = []
    for _ in range(12):
        w = w - 0.1 * (g * w - w.mean())      # rebinding: w is an expression over the previous w
        wn = wn - 0.1 * (gn * wn - wn.mean())
        with lt.profile() as p:
            np.testing.assert_allclose(w.numpy(), wn, rtol=1e-12)    # evaluated: w keeps its result
        launches.append(len(p.kernels))
        assert len(repr(w)) < 120, repr(w)
    assert launches == [2] * 12, launches       # the mean, then one fused kernel: every iteration alike


def test_view_of_an_expression_over_a_value_evaluated_since():
    t0, t1 = _cpu(np.arange(12.0).reshape(3, 4)), _cpu(np.ones((3, 4)))
    e0 = t0 + t1
    e1 = t0 + e0                              # e0 keeps its value at the next write, dropping its operands
    t1[...] = t1 * 5
    want = (np.arange(12.0) * 2 + 1).reshape(3, 4)[0]
    np.testing.assert_array_equal(e1[0, :].numpy(), want)


# -- the property: random programs give NumPy's values step by step -----------------------------

SHAPE = (3, 4)
OPS = {"add": np.add, "multiply": np.multiply, "subtract": np.subtract}
VIEWS = [(slice(None), slice(None)), (1, slice(None)), (slice(None), slice(1, None, 2)),
         (slice(None, None, -1), slice(None))]

refs = st.tuples(st.sampled_from(["tensor", "expr", "view"]), st.integers(0, 5))
steps = st.one_of(
    st.tuples(st.just("build"), st.sampled_from(sorted(OPS)), refs, refs),
    st.tuples(st.just("reduce"), refs, st.sampled_from([0, 1])),
    st.tuples(st.just("inplace"), st.integers(0, 2), st.sampled_from(sorted(OPS)), refs),
    st.tuples(st.just("write_view"), st.integers(0, 2), st.integers(0, len(VIEWS) - 1), refs),
    st.tuples(st.just("assign"), st.integers(0, 2), refs),
    st.tuples(st.just("evaluate"), refs, st.sampled_from(["numpy", "float", "evaluate"])),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(steps, min_size=1, max_size=10), st.integers(0, 2**31))
def test_random_programs_match_numpy_step_by_step(program, seed):
    rng = np.random.default_rng(seed)
    host = [rng.integers(-3, 4, SHAPE).astype(np.float64) for _ in range(3)]
    tensors = [_cpu(h) for h in host]
    exprs = []                                 # (lazy expression, its NumPy value at build time)

    def resolve(ref):
        kind, i = ref
        if kind == "expr" and exprs:
            lazy, value = exprs[i % len(exprs)]
            return lazy, value
        j = i % 3
        if kind == "view":                    # a view of a tensor, at the full shape
            return tensors[j][::-1], host[j][::-1]
        return tensors[j], host[j]

    for step in program:
        kind = step[0]
        if kind == "build":
            _, op, a, b = step
            (la, va), (lb, vb) = resolve(a), resolve(b)
            exprs.append((getattr(lt.Tensor, f"__{op[:3] if op != 'multiply' else 'mul'}__")(la, lb), OPS[op](va, vb)))
        elif kind == "reduce":
            _, a, axis = step
            la, va = resolve(a)
            exprs.append((la.sum(axis=axis, keepdims=True) + la * 0, va.sum(axis=axis, keepdims=True) + va * 0))
        elif kind == "inplace":
            _, i, op, b = step
            lb, vb = resolve(b)
            ufunc = OPS[op]
            ufunc(tensors[i], lb, out=tensors[i]) if op == "subtract" else \
                tensors[i].__setitem__(Ellipsis, ufunc(tensors[i], lb))
            ufunc(host[i], vb, out=host[i])
        elif kind == "write_view":
            _, i, v, b = step
            lb, vb = resolve(b)
            key = VIEWS[v]
            tensors[i][key] = lb[key]
            host[i][key] = vb[key]
        elif kind == "assign":
            _, i, b = step
            lb, vb = resolve(b)
            tensors[i][...] = lb
            host[i][...] = vb
        else:
            _, a, how = step
            la, va = resolve(a)
            if how == "numpy":
                np.testing.assert_array_equal(np.asarray(la), va)
            elif how == "float":
                assert float(la.sum()) == va.sum()
            else:
                np.testing.assert_array_equal(lt.evaluate(la).numpy(), va)
    for lazy, value in exprs:
        np.testing.assert_array_equal(lazy.numpy(), value)
    for t, h in zip(tensors, host):
        np.testing.assert_array_equal(t.numpy(), h)


@pytest.mark.gpu
@pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")
def test_on_cuda_copies_and_writes_keep_values():
    t = lt.asarray(np.arange(4.0, dtype=np.float32), device="cuda")
    with pytest.raises(ValueError, match="copy to the host"):
        np.asarray(t, copy=False)
    snap, got, host = np.asarray(t), t.get(), t.numpy()
    m = t.max()
    e = t * 2
    t -= m
    for a in (snap, got, host):
        np.testing.assert_array_equal(a, np.arange(4.0))
    assert float(m) == 3.0
    np.testing.assert_array_equal(e.numpy(), np.arange(4.0) * 2)
    np.testing.assert_array_equal(t.numpy(), np.arange(4.0) - 3)
