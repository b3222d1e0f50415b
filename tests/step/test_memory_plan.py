"""The static memory plan of a recorded step: temporaries alive at the same step never share bytes,
the arena holds the peak and is smaller than the sum of the temporaries for a VGG-like network;
the packing is never worse than largest-first first fit, and a conv output is freed after its last
backward reader (not kept to the plan's last step), so that VGG- and ResNet-like arenas come within
1% of the peak of live temporaries."""
import numpy as np
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.nn.models import BasicBlock
from lazytensor.step.memory_plan import ALIGNMENT, _packed, pack

INTERVALS = st.lists(st.tuples(st.integers(1, 64).map(lambda k: k * ALIGNMENT), st.integers(0, 30),
                               st.integers(0, 10)).map(lambda t: (t[0], t[1], t[1] + t[2])), max_size=40)


@settings(max_examples=150, deadline=None)
@given(intervals=INTERVALS)
def test_packing_never_overlaps_temporaries_alive_together(intervals):
    offsets, arena = pack(intervals)
    for i, (size, first, last) in enumerate(intervals):
        assert offsets[i] >= 0 and offsets[i] + size <= arena
        for j in range(i):
            s2, f2, l2 = intervals[j]
            if first <= l2 and f2 <= last:           # alive at a common step
                assert offsets[i] + size <= offsets[j] or offsets[j] + s2 <= offsets[i]
    peak = max((sum(s for s, f, l in intervals if f <= k <= l) for k in range(42)), default=0)
    assert peak <= arena <= sum(s for s, _, _ in intervals)


@settings(max_examples=100, deadline=None)
@given(intervals=INTERVALS)
def test_packing_is_never_worse_than_largest_first_first_fit(intervals):
    largest_first = sorted(range(len(intervals)), key=lambda j: (-intervals[j][0], intervals[j][1]))
    assert pack(intervals)[1] <= _packed(intervals, largest_first, best_fit=False)[1]


def test_another_order_beats_largest_first_where_it_leaves_a_hole():
    # Largest first puts the 3 KiB one at 0, then the 2 KiB one of step 1 at 0 and the one of steps
    # 1-3 above it, so that the one of steps 3-6 goes to 4 KiB: 6 KiB. Placing the 2 KiB ones first
    # leaves the 3 KiB one a place beside them: 5 KiB, the peak of steps 3 and 4.
    k = 1024
    intervals = [(2 * k, 1, 1), (2 * k, 1, 3), (3 * k, 4, 6), (2 * k, 3, 6)]
    largest_first = sorted(range(4), key=lambda j: (-intervals[j][0], intervals[j][1]))
    assert _packed(intervals, largest_first, best_fit=False)[1] == 6 * k
    assert pack(intervals)[1] == 5 * k


def test_disjoint_lifetimes_share_memory():
    offsets, arena = pack([(1024, 0, 1), (1024, 2, 3), (512, 1, 2)])
    assert arena == 1536 and offsets[0] == offsets[1]      # the peak: 1024 + 512 at steps 1 and 2


def vgg_like(seed=0):
    rng = np.random.default_rng(seed)
    layers, c = [], 3
    for k in (8, 8, "M", 16, 16, "M"):
        if k == "M":
            layers.append(lt.nn.MaxPool2d(2))
            continue
        layers += [lt.nn.Conv2d(c, k, 3, padding=1, bias=False, rng=rng), lt.nn.BatchNorm2d(k), lt.nn.ReLU()]
        c = k
    return lt.nn.Sequential(*layers, lt.nn.Flatten(), lt.nn.Linear(16 * 2 * 2, 4, rng=rng))


def test_the_arena_of_a_vgg_like_step_is_smaller_than_its_temporaries():
    model = vgg_like()
    step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    rng = np.random.default_rng(1)
    losses = [float(step(rng.standard_normal((4, 8, 8, 3)).astype(np.float32), rng.integers(0, 4, 4)).numpy())
              for _ in range(2)]
    assert all(np.isfinite(losses))
    memory = step.last.plan.memory
    assert memory.temporaries > 10
    assert memory.peak <= memory.arena < memory.total
    assert memory.memory.nbytes == memory.arena          # one allocation
    text = lt.explain(step, source=False)
    assert f"arena {memory.arena / 2**20:.3f} MB in one allocation" in text


def resnet_like(seed=0):
    rng = np.random.default_rng(seed)
    return lt.nn.Sequential(lt.nn.Conv2d(3, 8, 3, padding=1, bias=False, rng=rng), lt.nn.BatchNorm2d(8), lt.nn.ReLU(),
                            BasicBlock(8, 8, rng=rng), BasicBlock(8, 16, stride=2, rng=rng),
                            lt.nn.GlobalAvgPool(), lt.nn.Flatten(), lt.nn.Linear(16, 4, rng=rng))


def test_vgg_and_resnet_like_arenas_come_within_one_percent_of_the_peak():
    # Before: 3.5% (VGG-like) and 2.6% (ResNet-like) above it, as every conv output lived until the
    # batch_norm commit at the plan's end and the packing was largest first, lowest offset alone;
    # the arenas were 75264 and 102912 bytes, now 71680 and 99328 (elementwise steps writing in
    # place of an input that dies there lower the peak itself).
    rng = np.random.default_rng(1)
    x, labels = rng.standard_normal((4, 8, 8, 3)).astype(np.float32), rng.integers(0, 4, 4)
    for build in (vgg_like, resnet_like):
        model = build()
        step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
        step(x, labels)
        memory = step.last.plan.memory
        last = len(step.last.plan.steps) - 1
        convs = [l for (_, _, l), kind in zip(memory.lifetimes, memory.kinds) if kind == "Conv2dStep"]
        assert convs and max(convs) < last - 4, build.__name__      # freed after the backward read them
        assert memory.peak <= memory.arena <= 1.01 * memory.peak, build.__name__
        alone = [(-(-b // ALIGNMENT) * ALIGNMENT, f, l) for b, f, l in memory.lifetimes]
        largest_first = sorted(range(len(alone)), key=lambda j: (-alone[j][0], alone[j][1]))
        assert memory.arena <= _packed(alone, largest_first, best_fit=False)[1]     # the packing before


def test_live_temporaries_of_a_planned_step_never_share_bytes_but_in_place():
    # Two temporaries alive at one step share bytes only where an elementwise step writes one in
    # place of the other, which dies at that very step.
    rng = np.random.default_rng(2)
    for build in (vgg_like, resnet_like):
        model = build()
        step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
        step(rng.standard_normal((4, 8, 8, 3)).astype(np.float32), rng.integers(0, 4, 4))
        memory = step.last.plan.memory
        spans, offsets = memory.lifetimes, memory.offsets
        assert memory.in_place, build.__name__
        for i, (si, fi, li) in enumerate(spans):
            for j in range(i):
                sj, fj, lj = spans[j]
                if fi <= lj and fj <= li and offsets[i] < offsets[j] + sj and offsets[j] < offsets[i] + si:
                    pair = memory.in_place.get(i) == j or memory.in_place.get(j) == i
                    assert pair and (li == fj or lj == fi), (build.__name__, i, j)
            assert offsets[i] + si <= memory.arena
