"""The static memory plan of a recorded step: temporaries alive at the same step never share bytes,
the arena holds the peak and is smaller than the sum of the temporaries for a VGG-like network."""
import numpy as np
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.plan.memory_plan import ALIGNMENT, pack

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
