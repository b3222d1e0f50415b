"""Several results at once on a CUDA device, against NumPy: random DAG families, the issue's examples
as one kernel each, swaps and aliasing, float16 and strided destinations. Skipped without CUDA."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402
from lazytensor.testing import assert_matches, dags  # noqa: E402

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), print_blob=True)


def _gpu(values):
    return lt.asarray(np.array(values), device="cuda")


def _kinds(p):
    return [k.kind for k in p.kernels]


@SETTINGS
@given(dags(device="cuda", max_leaves=3, max_ops=6), st.data())
def test_random_dag_families_match_numpy(dag, data):
    picks = data.draw(st.lists(st.sampled_from(dag.nodes), min_size=2, max_size=4))
    shape = np.broadcast_shapes(*[n.expected.shape for n in picks])
    dests = []
    for n in picks:
        if shape and data.draw(st.booleans()):
            dests.append(lt.zeros(shape[:-1] + (2 * shape[-1],), n.dtype, device="cuda")[..., ::2])
        else:
            dests.append(lt.zeros(shape, n.dtype, device="cuda"))
    with lt.profile() as p:
        lt.assign([(d, n.expr) for d, n in zip(dests, picks)])
    assert len(p.kernels) <= 1          # none when the shape is empty
    for k, (d, n) in enumerate(zip(dests, picks)):
        err = np.broadcast_to(n.err, shape) if isinstance(n.err, np.ndarray) else n.err
        assert_matches(d.numpy(), np.broadcast_to(n.expected, shape), err, f"result {k}: {n.text}")
    results = lt.evaluate(*[n.expr for n in picks])
    for k, (r, n) in enumerate(zip(results, picks)):
        assert_matches(r.numpy(), n.expected, n.err, f"evaluated result {k}: {n.text}")


@pytest.mark.parametrize("n", [1 << 20, (1 << 20) + 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gradients_of_sum_tanh_one_vector_kernel(dtype, n):
    rng = np.random.default_rng(0)
    an, bn, cn, dn = (rng.standard_normal(n).astype(dtype) for _ in range(4))
    a, b, c, d = map(_gpu, (an, bn, cn, dn))
    t = lt.tanh(a * b + c)
    dz = d * (1 - t * t)
    with lt.profile() as p:
        ga, gb, gc, gd = lt.evaluate(dz * b, dz * a, dz, t)
    assert _kinds(p) == ["elementwise"]
    text = lt.explain([dz * b, dz * a, dz, t], source=True)
    assert "16-byte vector loads and stores" in text and "out3 contiguous" in text
    f = np.float64
    tn = np.tanh(an.astype(f) * bn + cn)
    dzn = dn.astype(f) * (1 - tn * tn)
    tol = 1e-5 if dtype == np.float32 else 2e-2
    for got, ref in zip((ga, gb, gc, gd), (dzn * bn, dzn * an, dzn, tn)):
        np.testing.assert_allclose(got.numpy().astype(f), ref, rtol=tol, atol=tol)


def test_momentum_update_and_swap():
    rng = np.random.default_rng(1)
    vn, wn, gn = (rng.standard_normal((512, 96)).astype(np.float32) for _ in range(3))
    v, w, g = map(_gpu, (vn, wn, gn))
    v_new = 0.9 * v + g
    with lt.profile() as p:
        lt.assign([(v, v_new), (w, w - 0.01 * v_new)])
    assert _kinds(p) == ["elementwise"]
    v_ref = np.float32(0.9) * vn + gn
    np.testing.assert_allclose(v.numpy(), v_ref, rtol=1e-6)
    np.testing.assert_allclose(w.numpy(), wn - np.float32(0.01) * v_ref, rtol=1e-6)
    lt.assign([(v, w), (w, v)])
    np.testing.assert_array_equal(v.numpy(), wn - np.float32(0.01) * v_ref)
    np.testing.assert_allclose(w.numpy(), v_ref, rtol=1e-6)


def test_shared_reduction_once_and_aliasing_through_views():
    rng = np.random.default_rng(2)
    xn = rng.standard_normal((2, 4096)).astype(np.float32)
    x = _gpu(xn)
    s = x.sum()
    with lt.profile() as p:
        lt.assign([(x[0], x[1, ::-1] - s), (x[1], x[0] * s)])
    assert _kinds(p).count("reduction") == 1
    sn = np.float32(xn.astype(np.float64).sum())
    np.testing.assert_allclose(x.numpy(), np.stack([xn[1, ::-1] - sn, xn[0] * sn]), rtol=1e-5, atol=1e-4)
