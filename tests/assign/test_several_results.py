"""Several results at once (lt.evaluate(e1, e2, ...), lt.assign([(dst, e), ...])) on the CPU, against
NumPy: values on random DAGs over shared leaves, simultaneous-assignment semantics (swaps, aliasing
through views), kernel counts by lt.profile, explain, and bad input."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lazytensor as lt
from lazytensor.testing import assert_matches, dags

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Each random DAG compiles new kernels (a second or two each): a few examples here, many under `slow`.
DAG_SETTINGS = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW_DAG_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _kinds(p):
    return [k.kind for k in p.kernels]


def _f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- values on random DAGs -------------------------------------------------------------------------

@DAG_SETTINGS
@given(dags(max_leaves=3, max_ops=6), st.data())
def test_evaluate_several_random_dags(dag, data):
    """Several nodes of one random DAG (shared leaves and subexpressions), evaluated together."""
    picks = data.draw(st.lists(st.sampled_from(dag.nodes), min_size=2, max_size=4))
    results = lt.evaluate(*[n.expr for n in picks])
    assert isinstance(results, tuple) and len(results) == len(picks)
    for k, (r, n) in enumerate(zip(results, picks)):
        assert_matches(r.numpy(), n.expected, n.err, f"result {k} of {len(picks)}: {n.text}")


@DAG_SETTINGS
@given(dags(max_leaves=3, max_ops=6), st.data())
def test_assign_several_random_dags_one_kernel(dag, data):
    """Destinations of one shape (each expression broadcast to it), some strided: ONE kernel."""
    picks = data.draw(st.lists(st.sampled_from(dag.nodes), min_size=2, max_size=4))
    shape = np.broadcast_shapes(*[n.expected.shape for n in picks])
    dests = []
    for n in picks:
        if shape and data.draw(st.booleans()):          # a strided destination: every other element
            base = lt.zeros(shape[:-1] + (2 * shape[-1],), n.dtype)
            dests.append(base[..., ::2])
        else:
            dests.append(lt.zeros(shape, n.dtype))
    with lt.profile() as p:
        lt.assign([(d, n.expr) for d, n in zip(dests, picks)])
    assert _kinds(p) == ["elementwise"]
    for k, (d, n) in enumerate(zip(dests, picks)):
        assert_matches(d.numpy(), np.broadcast_to(n.expected, shape), np.broadcast_to(n.err, shape)
                       if isinstance(n.err, np.ndarray) else n.err, f"result {k}: {n.text}")


@pytest.mark.slow
@SLOW_DAG_SETTINGS
@given(dags(max_leaves=4, max_ops=7), st.data())
def test_several_random_dags_long_hunt(dag, data):
    test_evaluate_several_random_dags.hypothesis.inner_test(dag, data)
    test_assign_several_random_dags_one_kernel.hypothesis.inner_test(dag, data)


@pytest.mark.parametrize("dtypes", [("float16", "int32", "bool"), ("uint8", "float64", "float16")])
def test_outputs_of_different_dtypes_in_one_kernel(dtypes):
    x = lt.asarray(np.linspace(-3, 3, 37, dtype=np.float32))
    exprs = [x * 2, (x * 2) > 0.5, lt.floor(x * 2)]
    dests = [lt.empty((37,), dt) for dt in dtypes]
    pairs = [(d, e if np.can_cast(e.dtype, d.dtype, "same_kind") else e.astype(d.dtype)) for d, e in zip(dests, exprs)]
    with lt.profile() as p:
        lt.assign(pairs)
    assert _kinds(p) == ["elementwise"]
    xn = np.linspace(-3, 3, 37, dtype=np.float32)
    for d, (_, e), ref in zip(dests, pairs, [xn * 2, (xn * 2) > 0.5, np.floor(xn * 2)]):
        np.testing.assert_array_equal(d.numpy(), ref.astype(d.dtype))


# -- the examples --------------------------------------------------------------------------

def test_gradients_of_sum_tanh_are_one_kernel():
    """The gradients of a, b, c, d of sum(tanh(a * b + c) * d), written out: one kernel, 4 outputs."""
    an, bn, cn, dn = (_f32(5, 33, seed=s) for s in range(4))
    a, b, c, d = (lt.asarray(x.copy()) for x in (an, bn, cn, dn))
    t = lt.tanh(a * b + c)
    dz = d * (1 - t * t)
    text = lt.explain([dz * b, dz * a, dz, t], source=False)     # before: evaluated expressions keep results
    with lt.profile() as p:
        ga, gb, gc, gd = lt.evaluate(dz * b, dz * a, dz, t)
    assert _kinds(p) == ["elementwise"]
    tn = np.tanh(an * bn + cn)
    dzn = dn * (1 - tn * tn)
    for got, ref in zip((ga, gb, gc, gd), (dzn * bn, dzn * an, dzn, tn)):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-6)
    assert "FusedElementwise with 4 outputs" in text and "6 shared by several outputs" in text


def test_momentum_update_writes_v_and_w_in_one_kernel():
    vn, wn, gn = _f32(1000, seed=1), _f32(1000, seed=2), _f32(1000, seed=3)
    v, w, g = (lt.asarray(x.copy()) for x in (vn, wn, gn))
    mu, lr = 0.9, 0.01
    v_new = mu * v + g
    with lt.profile() as p:
        lt.assign([(v, v_new), (w, w - lr * v_new)])       # v is read before it is written
    assert _kinds(p) == ["elementwise"]
    v_ref = np.float32(mu) * vn + gn
    np.testing.assert_allclose(v.numpy(), v_ref, rtol=1e-6)
    np.testing.assert_allclose(w.numpy(), wn - np.float32(lr) * v_ref, rtol=1e-6)


def test_a_shared_reduction_runs_once():
    an, bn = _f32(40, 9, seed=4), _f32(40, 9, seed=5)
    a, b = lt.asarray(an.copy()), lt.asarray(bn.copy())
    s = (a * b).sum()
    with lt.profile() as p:
        x, y = lt.evaluate(a - s, b * s)
    assert _kinds(p) == ["reduction", "elementwise"]
    assert "shared by results 0 and 1: runs once" in lt.explain([a - s, b * s], source=False)
    sn = (an.astype(np.float64) * bn).sum().astype(np.float32)
    np.testing.assert_allclose(x.numpy(), an - sn, rtol=1e-5)
    np.testing.assert_allclose(y.numpy(), bn * sn, rtol=1e-5)


def test_results_of_different_shapes_are_one_kernel_per_shape():
    xn = _f32(30, 7, seed=6)
    x = lt.asarray(xn)
    m = x.mean(axis=0)
    with lt.profile() as p:
        centered, scaled, total = lt.evaluate(x - m, m * 2, x * 3)
    assert sorted(_kinds(p)) == ["elementwise", "elementwise", "reduction"]
    mn = xn.mean(axis=0, dtype=np.float64).astype(np.float32)
    np.testing.assert_allclose(centered.numpy(), xn - mn, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(scaled.numpy(), mn * 2, rtol=1e-6)
    np.testing.assert_allclose(total.numpy(), xn * 3, rtol=1e-6)
    text = lt.explain([x - m, m * 2, x * 3], source=False)
    assert "2 shapes among the results, one kernel per shape" in text
    assert "plan: 3 steps" in text and "recipe: kept after the first call" in text


# -- simultaneous assignment -----------------------------------------------------------------------

@pytest.mark.parametrize("n", [6, (1 << 17) + 3])      # a serial and a parallel (prange) kernel
def test_swap_and_rotate(n):
    """A result that reads a destination only for another result goes through a temporary: numba's
    parallel loop may store before that read (a swap in place copied one way)."""
    an, bn, cn = _f32(n, seed=7), _f32(n, seed=8), _f32(n, seed=9)
    a, b, c = (lt.asarray(x.copy()) for x in (an, bn, cn))
    text = lt.explain([(a, b), (b, a)], source=False)
    assert "its kernel reads it for another result only, and may store before that read" in text
    lt.assign([(a, b), (b, a)])
    np.testing.assert_array_equal(a.numpy(), bn)
    np.testing.assert_array_equal(b.numpy(), an)
    lt.assign([(a, c), (b, a), (c, b)])                    # (a, b, c) = (c, a, b)
    np.testing.assert_array_equal(a.numpy(), cn)
    np.testing.assert_array_equal(b.numpy(), bn)
    np.testing.assert_array_equal(c.numpy(), an)


VIEWS = {   # views of a (2, 6) buffer x; the destinations are its rows, which never overlap each other
    "x0": lambda x: x[0], "x1": lambda x: x[1], "x0 reversed": lambda x: x[0, ::-1], "x1 reversed": lambda x: x[1, ::-1],
}
READS = ["x0", "x1", "x0 reversed", "x1 reversed"]


@SETTINGS
@given(st.permutations([0, 1]), st.lists(st.sampled_from(READS), min_size=2, max_size=2),
       st.lists(st.floats(-4, 4, width=32), min_size=2, max_size=2))
def test_aliasing_through_views_reads_before_writes(rows, reads, scales):
    """Destinations x[0] and x[1] of one buffer, expressions reading either row, forwards or
    reversed: NumPy with every right side computed before any write is the oracle."""
    xn = _f32(2, 6, seed=10)
    x = lt.asarray(xn.copy())
    pairs = [(VIEWS[f"x{r}"](x), VIEWS[read](x) * s + 1) for r, read, s in zip(rows, reads, scales)]
    expected = xn.copy()
    values = [VIEWS[read](xn) * np.float32(s) + np.float32(1) for read, s in zip(reads, scales)]
    for r, value in zip(rows, values):
        expected[r] = value
    lt.assign(pairs)
    np.testing.assert_array_equal(x.numpy(), expected)


def test_a_destination_read_through_another_index_map_goes_through_a_temporary():
    xn = _f32(2, 6, seed=11)
    x = lt.asarray(xn.copy())
    pairs = [(x[0], x[1, ::-1]), (x[1], x[0] + 1)]
    text = lt.explain(pairs, source=False)
    assert "a temporary for result 1 (its kernel reads it through another index map)" in text
    assert "copy the temporary into result 1" in text
    lt.assign(pairs)
    np.testing.assert_array_equal(x.numpy(), np.stack([xn[1, ::-1], xn[0] + 1]))


def test_kernels_of_other_shapes_run_readers_first_or_through_a_temporary():
    """b is written by the (4,)-shaped kernel and read by the (3, 4)-shaped one: that one runs first,
    no temporary. When each kernel reads what the other writes (a cycle), one result goes through a
    temporary."""
    an, bn = _f32(3, 4, seed=12), _f32(4, seed=13)
    a, b = lt.asarray(an.copy()), lt.asarray(bn.copy())
    pairs = [(b, b * 2), (a, a + b)]
    text = lt.explain(pairs, source=False)
    assert "temporary" not in text and text.index("writes out = result 1") < text.index("writes out = result 0")
    lt.assign(pairs)
    np.testing.assert_array_equal(a.numpy(), an + bn)
    np.testing.assert_array_equal(b.numpy(), bn * 2)

    a, b = lt.asarray(an.copy()), lt.asarray(bn.copy())
    pairs = [(a, a + b), (b, b * a[0])]
    assert "a kernel for results of another shape, run after it, reads it" in lt.explain(pairs, source=False)
    lt.assign(pairs)
    np.testing.assert_array_equal(a.numpy(), an + bn)
    np.testing.assert_array_equal(b.numpy(), bn * an[0])


@pytest.mark.parametrize("n", [8, (1 << 17) + 1])
def test_in_place_at_the_same_index_needs_no_temporary(n):
    """Each result computed from the destination it overwrites: the store waits for that read."""
    an, bn = _f32(n, seed=14), _f32(n, seed=15)
    a, b = lt.asarray(an.copy()), lt.asarray(bn.copy())
    pairs = [(a, a * b), (b, a + b)]
    text = lt.explain(pairs, source=False)
    assert "temporary" not in text and "plan: 1 step" in text
    lt.assign(pairs)
    np.testing.assert_array_equal(a.numpy(), an * bn)
    np.testing.assert_array_equal(b.numpy(), an + bn)


# -- the API ---------------------------------------------------------------------------------------

def test_evaluate_forms():
    a = lt.asarray(_f32(5, seed=16))
    one = lt.evaluate(a + 1)
    assert isinstance(one, lt.Tensor)
    copy, new = lt.evaluate(a, a * 2)
    assert copy is not a and isinstance(new, lt.Tensor)          # a Tensor is copied, as by lt.evaluate(a)
    np.testing.assert_array_equal(copy.numpy(), a.numpy())
    assert not np.shares_memory(copy.numpy(), a.numpy())
    x, y = lt.evaluate(a + 1, [1.0, 2.0])
    assert np.asarray(y).tolist() == [1.0, 2.0]


def test_explain_shows_exactly_the_steps_that_run():
    a, b = lt.asarray(_f32(10, 3, seed=17)), lt.asarray(_f32(3, seed=18))
    exprs = [a * b.sum(), b + a.max(axis=0), a - 1]
    steps = lt.explain(exprs, source=False).steps
    with lt.profile() as p:
        lt.evaluate(*exprs)
    assert len(p.kernels) == len(steps) == 4      # two reductions, a kernel per shape


def test_destinations_that_overlap_are_refused():
    x = lt.zeros((4, 4))
    with pytest.raises(ValueError, match="destinations 0 and 1 share memory"):
        lt.assign([(x[0], x[1] + 1), (x[:, 0], x[2] * 2)])


@pytest.mark.parametrize("pairs, error, message", [
    (None, TypeError, "takes a list of"),
    ([(1, 2)], TypeError, "destination of pair 0 is a int, not a Tensor"),
    ([(lt.zeros(3),)], TypeError, "item 0 is not a"),
])
def test_bad_input(pairs, error, message):
    with pytest.raises(error, match=message):
        lt.assign(pairs)


def test_bad_pairs_name_their_position():
    a, b = lt.zeros((3,), np.float32), lt.zeros((4,), np.float32)
    with pytest.raises(ValueError, match=r"pair 1: cannot assign an expression of shape \(4,\)"):
        lt.assign([(a, a + 1), (lt.zeros(3, np.float32), b)])
    with pytest.raises(TypeError, match="pair 1: cannot assign float32 to int32"):
        lt.assign([(a, a + 1), (lt.zeros(4, np.int32), b)])


# -- whole-plan patterns (the fused CBR path) --------------------------------------------------------

def _cbr(x, w, c, saved):
    gamma, beta = lt.asarray(np.linspace(0.5, 1.5, c, dtype=np.float32)), lt.asarray(np.zeros(c, np.float32))
    rm, rv = lt.zeros((c,), np.float32), lt.ones((c,), np.float32)
    y = lt.relu(lt.batch_norm(lt.conv2d(x, w, stride=1, padding=1), gamma, beta, rm, rv, training=True,
                              momentum=0.1, eps=1e-5, saved=saved))
    return y, rm, rv


def test_a_cbr_result_takes_the_fused_path_beside_other_results():
    """relu(batch_norm(conv2d)) in training among several results is planned by its pattern (the
    ReLU mask is written), exactly as it is alone; the other result reads x, which it leaves alone."""
    rng = np.random.default_rng(19)
    xn = rng.standard_normal((2, 5, 5, 3)).astype(np.float32)
    wn = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    x, w = lt.asarray(xn), lt.asarray(wn)
    alone_saved = lt.BatchNormSaved()
    alone, rm_alone, rv_alone = _cbr(x, w, 4, alone_saved)
    alone = lt.evaluate(alone)
    saved = lt.BatchNormSaved()
    y, rm, rv = _cbr(x, w, 4, saved)
    text = lt.explain([y, x * 2], source=False)
    assert "result 0: cbr training: apply + relu + mask in one kernel" in text
    got, doubled = lt.evaluate(y, x * 2)
    np.testing.assert_array_equal(got.numpy(), alone.numpy())
    np.testing.assert_array_equal(saved.relu_mask.numpy(), alone_saved.relu_mask.numpy())
    np.testing.assert_array_equal(rm.numpy(), rm_alone.numpy())
    np.testing.assert_array_equal(rv.numpy(), rv_alone.numpy())
    np.testing.assert_array_equal(doubled.numpy(), xn * 2)


def test_a_cbr_result_whose_destination_another_result_reads_goes_through_a_temporary():
    rng = np.random.default_rng(20)
    xn = rng.standard_normal((2, 4, 4, 4)).astype(np.float32)
    wn = rng.standard_normal((4, 3, 3, 4)).astype(np.float32)
    x, w = lt.asarray(xn.copy()), lt.asarray(wn)
    ref, _, _ = _cbr(lt.asarray(xn.copy()), w, 4, lt.BatchNormSaved())
    ref = lt.evaluate(ref).numpy()
    y, _, _ = _cbr(x, w, 4, lt.BatchNormSaved())
    out = lt.zeros(xn.shape)
    pairs = [(x, y), (out, x + 1)]               # x is overwritten by the CBR result and read by x + 1
    assert "into a temporary (another result reads its destination)" in lt.explain(pairs, source=False)
    lt.assign(pairs)
    np.testing.assert_array_equal(x.numpy(), ref)
    np.testing.assert_array_equal(out.numpy(), xn + 1)


def test_a_node_built_twice_from_the_same_operands_is_computed_once():
    an, bn = _f32(9, seed=21), _f32(9, seed=22)
    a, b = lt.asarray(an), lt.asarray(bn)
    exprs = [lt.exp(a * b) + 1, lt.exp(a * b) * 2]      # two separate a * b and exp(...) nodes
    assert "(2 shared by several outputs, computed once)" in lt.explain(exprs, source=False)
    x, y = lt.evaluate(*exprs)
    np.testing.assert_allclose(x.numpy(), np.exp(an * bn) + 1, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), np.exp(an * bn) * 2, rtol=1e-6)


def test_a_reduction_result_writes_its_destination_itself():
    """lt.evaluate(x.sum(axis=0), x * 2): the reduction writes its new tensor directly, no copy."""
    xn = _f32(50, 6, seed=23)
    x = lt.asarray(xn.copy())
    with lt.profile() as p:
        s, d = lt.evaluate(x.sum(axis=0), x * 2)
    assert _kinds(p) == ["reduction", "elementwise"]
    np.testing.assert_allclose(s.numpy(), xn.sum(axis=0, dtype=np.float64).astype(np.float32), rtol=1e-6)
    np.testing.assert_array_equal(d.numpy(), xn * 2)
    # a destination another result reads is not written early: the sum goes to a temporary, copied
    # into y after the kernel that reads y
    y = lt.asarray(xn[0].copy())
    with lt.profile() as p:
        lt.assign([(y, x.sum(axis=0)), (x, x + y)])
    assert _kinds(p) == ["reduction", "elementwise", "elementwise"]
    np.testing.assert_allclose(y.numpy(), xn.sum(axis=0, dtype=np.float64).astype(np.float32), rtol=1e-6)
    np.testing.assert_array_equal(x.numpy(), xn + xn[0])


TEMPLATES = [lambda x, y: x, lambda x, y: x + y, lambda x, y: x * 2 - y, lambda x, y: lt.maximum(x, y) * x]
NP_TEMPLATES = [lambda x, y: x, lambda x, y: x + y, lambda x, y: x * np.float32(2) - y,
                lambda x, y: np.maximum(x, y) * x]


@DAG_SETTINGS
@given(st.permutations([0, 1, 2]), st.integers(2, 3),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 2)), min_size=3, max_size=3))
def test_in_place_results_over_shared_tensors_parallel_kernels(dest_order, count, forms):
    """Destinations that are the very tensors the expressions read, at the same index, with arrays
    large enough for numba's parallel loop: NumPy with every right side computed first is the oracle."""
    n = (1 << 17) + 7
    pool_np = [_f32(n, seed=30 + k) for k in range(3)]
    pool = [lt.asarray(x.copy()) for x in pool_np]
    pairs, expected = [], [x.copy() for x in pool_np]
    for d, (form, i, j) in zip(dest_order[:count], forms):
        pairs.append((pool[d], TEMPLATES[form](pool[i], pool[j])))
        expected[d] = NP_TEMPLATES[form](pool_np[i], pool_np[j])
    lt.assign(pairs)
    for k in range(3):
        np.testing.assert_array_equal(pool[k].numpy(), expected[k])
