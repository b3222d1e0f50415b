"""The plan cache is bounded: programs of ever new structures (other scalars, other shapes) keep at
most the recipes' bound, and the process's memory stops growing once the bound is reached."""
import gc
import tracemalloc

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.reuse import recipes


def _program(k):
    """A heavy program whose structure differs with k: a scalar of its own, one of 40 shapes."""
    x = lt.asarray(np.ones((k % 40 + 1, 3), np.float32), device="cpu")
    return x - x.mean(axis=0) * float(k)


def _grown(first, last) -> int:
    for k in range(first, last):
        lt.evaluate(_program(k))
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


@pytest.mark.parametrize("structures", [pytest.param(2_000, id="2000"),
                                        pytest.param(10_000, id="10000", marks=pytest.mark.slow)])
def test_new_structures_keep_the_cache_and_memory_bounded(structures):
    recipes.clear()
    tracemalloc.start()
    try:
        filled = _grown(0, 2 * recipes._MAX_RECIPES)          # the cache full, every kernel compiled
        later = _grown(2 * recipes._MAX_RECIPES, structures)
    finally:
        tracemalloc.stop()
        recipes.clear()
    assert recipes.count() <= recipes._MAX_RECIPES
    assert later - filled < 1 << 20, f"grew by {(later - filled) / 2**20:.1f} MiB over {structures} structures"
