"""The plan cache by structure: a heavy program run again with other values in the same structure
reuses its plan (lt.explain says "hit"), and one structural change (a shape, a dtype, an aliasing
between leaves, a scalar's type or value, a view's strides) misses it, with lt.explain naming what
differs; every value equals NumPy's."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.reuse import recipes
from lazytensor.reuse import several_recipes


@pytest.fixture(autouse=True)
def fresh_recipes():
    recipes.clear()
    yield
    recipes.clear()


def program(a, b, s):
    """A matmul with elementwise work on both sides and a reduction after it."""
    h = (a * s + 1) @ b
    return h - h.mean(axis=0) * s


def leaves(cfg, seed):
    """(a, b) as NumPy arrays for the structure `cfg`: a is (n, k) or a strided view of an (n, 2k)
    array, b is (k, m), or a itself where cfg aliases them (n == k == m)."""
    rng = np.random.default_rng(seed)
    n, k, m, dtype, strided, alias = cfg["n"], cfg["k"], cfg["m"], cfg["dtype"], cfg["strided"], cfg["alias"]
    base = rng.standard_normal((n, 2 * k) if strided else (n, k)).astype(dtype)
    b = None if alias else rng.standard_normal((k, m)).astype(dtype)
    return base, b


def run(cfg, seed):
    """Builds the program over fresh tensors holding other values; -> (its note, its value, NumPy's)."""
    base, b_np = leaves(cfg, seed)
    base_t = lt.asarray(base)
    a = base_t[:, ::2] if cfg["strided"] else base_t
    a_np = base[:, ::2] if cfg["strided"] else base
    b = a if cfg["alias"] else lt.asarray(b_np)
    b_np = a_np if cfg["alias"] else b_np
    s = cfg["scalar"]
    e = program(a, b, s)
    note = next(n for n in lt.explain(e, source=False).notes if n.startswith("plan cache"))
    got = lt.evaluate(e).numpy()
    with np.errstate(all="ignore"):
        want = program(a_np, b_np, cfg["dtype"].type(s) if type(s) is float else s)
    return note, got, np.asarray(want)


# change -> (what the first structure must be for the change to be one change, the change, the words
# of the miss note)
CHANGES = {
    "shape": (lambda c: c, lambda c: {**c, "n": c["n"] + 1}, "a tensor's shape"),
    "dtype": (lambda c: c, lambda c: {**c, "dtype": np.dtype(np.float64 if c["dtype"] == np.float32 else np.float32)},
              "dtype"),
    "strides": (lambda c: c, lambda c: {**c, "strided": not c["strided"]}, "a tensor's strides"),
    "scalar value": (lambda c: c, lambda c: {**c, "scalar": c["scalar"] + 1.0}, "a scalar's value"),
    # a NumPy scalar is strongly typed (NEP 50): float32 arrays times a float64 promote to float64
    "scalar type": (lambda c: {**c, "dtype": np.dtype(np.float32)}, lambda c: {**c, "scalar": np.float64(c["scalar"])},
                    " node "),
    "aliasing": (lambda c: {**c, "n": c["k"], "m": c["k"], "strided": False}, lambda c: {**c, "alias": True},
                 " node "),
}


@given(n=st.integers(1, 5), k=st.integers(1, 5), m=st.integers(1, 5),
       dtype=st.sampled_from([np.dtype(np.float32), np.dtype(np.float64)]), strided=st.booleans(),
       scalar=st.sampled_from([0.5, 2.0, -1.5]), change=st.sampled_from(sorted(CHANGES)),
       seed=st.integers(0, 2**16))
@settings(max_examples=20, deadline=None)
def test_a_seen_structure_hits_and_one_change_misses(n, k, m, dtype, strided, scalar, change, seed):
    recipes.clear()
    prepare, make, words = CHANGES[change]
    cfg = prepare(dict(n=n, k=k, m=m, dtype=dtype, strided=strided, scalar=scalar, alias=False))
    dtype = cfg["dtype"]
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    note, got, want = run(cfg, seed)
    assert "miss" in note and "first program" in note
    np.testing.assert_allclose(got, want, **tol)
    kept = recipes.count()
    note, got, want = run(cfg, seed + 1)         # other values, the same structure
    assert note.startswith("plan cache: hit"), note
    assert recipes.count() == kept
    np.testing.assert_allclose(got, want, **tol)
    other = make(cfg)
    note, got, want = run(other, seed + 2)
    assert note.startswith("plan cache: miss"), note
    assert words in note and "first program" not in note, note
    assert recipes.count() == kept + 1
    tol = dict(rtol=1e-4, atol=1e-4) if other["dtype"] == np.float32 else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got, want, **tol)
    assert run(other, seed + 3)[0].startswith("plan cache: hit")


def test_the_miss_names_the_node_and_what_differs():
    x = lt.asarray(np.ones((3, 4), np.float32))
    w = lt.asarray(np.ones((4, 5), np.float32))
    lt.evaluate(lt.relu(x @ w + 1))
    w6 = lt.asarray(np.ones((4, 6), np.float32))
    note = lt.explain(lt.relu(x @ w6 + 1), source=False).notes[0]
    assert "node 1" in note and "a tensor's shape: (4, 6) here, (4, 5) there" in note
    note = lt.explain(lt.relu(x @ w + 2), source=False).notes[0]
    assert "a scalar's value (scalars are compiled in): 2.0 here, 1.0 there" in note


def test_several_results_say_hit_and_miss():
    x = lt.asarray(np.ones((3, 4), np.float32))
    w = lt.asarray(np.ones((4, 5), np.float32))
    made = several_recipes.plans_made[0]
    lt.evaluate(x @ w, lt.sum(x @ w))
    assert several_recipes.plans_made[0] == made + 1
    text = lt.explain([x @ w, lt.sum(x @ w)], source=False)
    assert "plan cache: hit" in text
    text = lt.explain([x @ w, lt.max(x @ w)], source=False)
    assert "plan cache: miss" in text and "max" in text.split("plan cache: miss")[1]


def test_cheap_programs_need_no_cache():
    x = lt.asarray(np.ones(5, np.float32), device="cpu")      # (on CUDA a reduction is kept, to replay)
    note = next(n for n in lt.explain(lt.sum(x * 2), source=False).notes if n.startswith("plan cache"))
    assert "not needed" in note
