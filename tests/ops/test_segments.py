"""Segmented sums (lazytensor.ops.segments) against float64 NumPy per segment, bit for bit equal to
lt.sum over each segment alone, the same bits in both tiers; the spread of per-segment values."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.ops.segments import segment_broadcast, segment_sums, segments_of
from tests.support.tiers import compiled_tier, interpreter_tier


def _layout(sizes, gap):
    starts, at = [], 0
    for n in sizes:
        starts.append(at)
        at += n + gap
    return segments_of(starts, sizes, at)


def _data(seg, dtype, seed):
    rng = np.random.default_rng(seed)
    x = np.zeros(seg.length, dtype)
    y = np.zeros(seg.length, dtype)
    for s, n in zip(seg.starts, seg.sizes):
        x[s:s + n] = rng.standard_normal(n)
        y[s:s + n] = rng.standard_normal(n)
    return x, y


def _sums(seg, x, y):
    a, b = lt.asarray(x), lt.asarray(y)
    return lt.evaluate(segment_sums([a * a, a * b + 1.0], seg)).numpy()


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 300), min_size=1, max_size=8), gap=st.sampled_from([0, 3, 64]),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 99))
def test_segment_sums_are_the_per_segment_sums(sizes, gap, dtype, seed):
    seg = _layout(sizes, gap)
    x, y = _data(seg, dtype, seed)
    got = _sums(seg, x, y)
    assert got.shape == (2, len(sizes)) and got.dtype == dtype
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    want = np.array([[np.sum(x64[s:s + n] ** 2), np.sum(x64[s:s + n] * y64[s:s + n] + 1.0)]
                     for s, n in zip(seg.starts, seg.sizes)]).T
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-12)
    for j, (s, n) in enumerate(zip(seg.starts, seg.sizes)):      # the per-tensor reduction's bits
        a, b = lt.asarray(x[s:s + n].copy()), lt.asarray(y[s:s + n].copy())
        assert got[0, j] == lt.evaluate(lt.sum(a * a)).numpy()
        assert got[1, j] == lt.evaluate(lt.sum(a * b + 1.0)).numpy()


@pytest.mark.parametrize("sizes", [[5, 1 << 17, 7], [200003]])
def test_a_large_segment_sums_in_the_chunks_of_the_full_sum_in_both_tiers(sizes):
    seg = _layout(sizes, 64)
    x, y = _data(seg, np.float32, 1)
    with compiled_tier():
        compiled = _sums(seg, x, y)
        per_tensor = [lt.evaluate(lt.sum(lt.asarray(x[s:s + n].copy()) ** 2)).numpy()
                      for s, n in zip(seg.starts, seg.sizes)]
    with interpreter_tier():
        interpreted = _sums(seg, x, y)
    np.testing.assert_array_equal(compiled, interpreted)
    np.testing.assert_array_equal(compiled[0], per_tensor)


def test_both_tiers_give_the_same_bits_with_a_scalar_operand():
    seg = _layout([3, 40, 1, 17], 5)
    x, y = _data(seg, np.float32, 2)
    t = lt.asarray(np.array(3, np.int64))
    outs = []
    for tier in (compiled_tier, interpreter_tier):
        with tier():
            a = lt.asarray(x)
            outs.append(lt.evaluate(segment_sums([a * a / (1.0 - 0.9 ** (t + 1)).astype(np.float32)], seg)).numpy())
    np.testing.assert_array_equal(*outs)


def test_segment_broadcast_spreads_each_value_and_keeps_gaps_zero():
    seg = _layout([2, 5, 1], 3)
    got = lt.evaluate(segment_broadcast(lt.asarray(np.array([1.5, -2.0, 7.0], np.float32)) * 2, seg)).numpy()
    want = np.zeros(seg.length, np.float32)
    for s, n, v in zip(seg.starts, seg.sizes, [3.0, -4.0, 14.0]):
        want[s:s + n] = v
    np.testing.assert_array_equal(got, want)


def test_segments_errors():
    with pytest.raises(ValueError, match="overlap"):
        segments_of([0, 2], [3, 3], 8)
    with pytest.raises(ValueError, match="past"):
        segments_of([0], [9], 8)
    seg = segments_of([0], [4], 4)
    with pytest.raises(ValueError, match="shape \\(4,\\)"):
        segment_sums([lt.asarray(np.ones(5))], seg)
    with pytest.raises(TypeError, match="floating-point"):
        segment_sums([lt.asarray(np.ones(4, np.int64))], seg)
