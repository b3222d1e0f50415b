"""lt.grad of a structure seen before comes from its template (the rules do not run again) and
gives exactly the gradients the rules give; a structural change of any kind misses the template."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from lazytensor.autodiff import templates


def _labels(n, k):
    return lt.asarray(np.arange(n) % k)


# Programs as users write them: leaves in, a scalar loss out. Shapes: (n, m) unless said.
PROGRAMS = {
    "tanh": (4, lambda a, b, c, d: lt.sum(lt.tanh(a * b + c) * d)),
    "broadcast": (2, lambda a, b: lt.sum((a[:, :1] * b[None, 0, :]) ** 2) / 3.0),
    "views": (2, lambda a, b: lt.sum(a.T[1:, ::2] * lt.exp(b.T[1:, ::2]))),
    "reductions": (2, lambda a, b: lt.mean(lt.max(a, axis=1) * lt.sum(b * b, axis=1))),
    "where": (2, lambda a, b: lt.sum(lt.where(a > 0, a * b, -b) + lt.clip(b, -0.5, 0.5))),
    "softmax": (2, lambda a, b: lt.sum(lt.softmax(a * b, axis=-1) * b)),
    "mlp": (3, lambda x, w1, w2: lt.cross_entropy(lt.relu(x @ w1) @ w2, _labels(x.shape[0], w2.shape[1]))),
    "shared": (2, lambda a, b: lt.sum((a + b) * (a + b) * a)),
}


def _shapes(name, n, m):
    if name == "mlp":
        return [(n, m), (m, 5), (5, 3)]
    return [(n, m)] * PROGRAMS[name][0]


def _values(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-2, 2, s).astype(dtype) for s in shapes]


def _gradients(name, values):
    leaves = [lt.asarray(v) for v in values]
    g = lt.grad(PROGRAMS[name][1](*leaves), leaves)
    return g, leaves


def _numpy(grads):
    return [np.asarray(lt.evaluate(g)) for g in grads]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(PROGRAMS)), n=st.integers(2, 5), m=st.integers(3, 6),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_a_seen_structure_gets_the_rules_gradients_from_its_template(name, n, m, dtype, seed):
    shapes = _shapes(name, n, m)
    templates.clear()
    first, _ = _gradients(name, _values(shapes, dtype, seed))
    assert not first.from_template
    second_values = _values(shapes, dtype, seed + 1)
    second, _ = _gradients(name, second_values)
    assert second.from_template
    got = _numpy(second)
    templates.clear()
    fresh, _ = _gradients(name, second_values)
    assert not fresh.from_template
    for a, b in zip(got, _numpy(fresh)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    assert len(second.stops) == len(fresh.stops) and len(second.paths) == len(fresh.paths)
    assert [t.shape for t in second.untouched] == [t.shape for t in fresh.untouched]


def _tanh(a, b, c, d):
    return lt.sum(lt.tanh(a * b + c) * d)


def _leaves(shape=(3, 4), dtype=np.float32, seed=0):
    return [lt.asarray(v) for v in _values([shape] * 4, dtype, seed)]


@pytest.mark.parametrize("change", ["shape", "dtype", "aliasing", "scalar value", "scalar type", "view strides",
                                    "inputs"])
def test_a_structural_change_misses_the_template(change):
    templates.clear()
    dtype = np.float16 if change == "scalar type" else np.float32   # a float64 scalar is not weak: float64 out
    a, b, c, d = _leaves(dtype=dtype)
    base = {"shape": lambda: lt.grad(_tanh(a, b, c, d), [a, b, c, d]),
            "dtype": lambda: lt.grad(_tanh(a, b, c, d), [a, b, c, d]),
            "aliasing": lambda: lt.grad(_tanh(a, b, c, d), [a, b, c, d]),
            "scalar value": lambda: lt.grad(lt.sum(a * 2.0 + b), [a, b]),
            "scalar type": lambda: lt.grad(lt.sum(a * 2.0 + b), [a, b]),
            "view strides": lambda: lt.grad(lt.sum(a[:, ::2] * b[:, ::2]), [a, b]),
            "inputs": lambda: lt.grad(_tanh(a, b, c, d), [a, b, c, d])}[change]
    assert not base().from_template
    assert base().from_template
    w, x, y, z = _leaves((3, 5) if change == "shape" else (3, 4), np.float64 if change == "dtype" else dtype, 1)
    other = {"shape": lambda: lt.grad(_tanh(w, x, y, z), [w, x, y, z]),
             "dtype": lambda: lt.grad(_tanh(w, x, y, z), [w, x, y, z]),
             "aliasing": lambda: lt.grad(_tanh(w, w, y, z), [w, y, z]),
             "scalar value": lambda: lt.grad(lt.sum(w * 3.0 + x), [w, x]),
             "scalar type": lambda: lt.grad(lt.sum(w * np.float64(2.0) + x), [w, x]),
             "view strides": lambda: lt.grad(lt.sum(w[:, 1::2] * x[:, 1::2]), [w, x]),
             "inputs": lambda: lt.grad(_tanh(w, x, y, z), [w, y, x, z])}[change]
    got = other()
    assert not got.from_template, change


def test_values_stay_values_through_a_template():
    templates.clear()
    fresh = _leaves(seed=1)
    expected = _numpy(lt.grad(_tanh(*fresh), fresh))
    w, x, y, z = _leaves(seed=1)
    grads = lt.grad(_tanh(w, x, y, z), [w, x, y, z])
    assert grads.from_template
    for t in (w, x, y, z):              # writes after the gradients were built do not reach them
        t[...] = 0.0
    for g, e in zip(_numpy(grads), expected):
        np.testing.assert_array_equal(g, e)


def test_a_write_to_a_gradient_does_not_reach_the_next_one():
    templates.clear()
    a, b = _leaves()[0], lt.asarray(np.float32(0.5))

    def grads():
        return lt.grad(lt.sum(lt.tanh(a) * 2.0) + b, [a, b])     # b's gradient: the seed, a writable tensor
    expected = _numpy(grads())
    held = grads()
    assert held.from_template
    for g in held:                      # the user writes into the gradients they hold
        g[...] = 7.0
    again = grads()
    for h, e in zip(_numpy(again), expected):
        np.testing.assert_array_equal(h, e)


def test_the_fused_cbr_backward_from_a_template():
    rng = np.random.default_rng(0)

    def program(values):
        x, w, g, b = (lt.asarray(v) for v in values)
        rm, rv = lt.zeros(4, np.float32), lt.ones(4, np.float32)
        y = lt.relu(lt.batch_norm(lt.conv2d(x, w, padding=1), g, b, rm, rv, training=True))
        grads = lt.grad(lt.sum(y * lt.asarray(np.linspace(-1, 1, 2 * 5 * 5 * 4, dtype=np.float32).reshape(2, 5, 5, 4))),
                        [x, w, g, b])
        return grads

    def values():
        return [rng.standard_normal((2, 5, 5, 3)).astype(np.float32),
                (rng.standard_normal((4, 3, 3, 3)) / 3).astype(np.float32),
                rng.uniform(0.5, 1.5, 4).astype(np.float32), rng.uniform(-0.5, 0.5, 4).astype(np.float32)]
    templates.clear()
    program(values())
    second_values = values()
    second = program(second_values)
    assert second.from_template
    assert any("fused CBR backward" in what for _, what in second.paths)
    got = _numpy(second)
    templates.clear()
    fresh = program(second_values)
    for a, b in zip(got, _numpy(fresh)):
        np.testing.assert_array_equal(a, b)


def test_the_template_cache_is_bounded():
    templates.clear()
    a, b = _leaves()[:2]
    for k in range(templates.MAX_TEMPLATES + 20):
        lt.grad(lt.sum(a * float(k) + b), [a, b])
    assert templates.counts()["templates"] <= templates.MAX_TEMPLATES
