"""The plan of linalg nodes (lazytensor.plan.heavy.linalg): one library call per decomposition, however
many of its results the plan reads; the elementwise work feeding it in one kernel before it and the
work reading it fused into the kernel after; the destination written by the call when it is the
root; plans kept by structure run again over new tensors."""
from __future__ import annotations

import numpy as np

import lazytensor as lt
from lazytensor.plan.heavy.linalg import LinalgStep
from lazytensor.reuse import recipes


def spd(n=4, batch=(3,), seed=0):
    a = np.random.default_rng(seed).standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def calls(run):
    with lt.profile() as p:
        value = run()
    return value, [k.name for k in p.kernels if k.kind == "linalg"]


def test_several_results_of_one_call_run_it_once():
    s = spd()
    x = lt.asarray(s)
    w, v = lt.linalg.eigh(x * 2.0)
    value, names = calls(lambda: np.asarray(v * w[..., None, :] + v))
    nw, nv = np.linalg.eigh(s * 2.0)
    np.testing.assert_allclose(value, nv * nw[..., None, :] + nv, rtol=1e-12, atol=1e-12)
    assert names == ["linalg.eigh"]
    u, sv, vh = lt.linalg.svd(x, full_matrices=False)
    (a, b), names = calls(lambda: lt.evaluate(u * sv[..., None, :] @ vh, sv.sum(axis=-1)))
    assert names == ["linalg.svd"]
    np.testing.assert_allclose(np.asarray(a), s, rtol=1e-12, atol=1e-12)


def test_results_of_one_call_as_the_roots_of_one_plan_each_fill_their_destination():
    """lt.evaluate(w, v): both results are roots; the call runs once and the second is copied."""
    s = spd()
    x = lt.asarray(s)
    nw, nv = np.linalg.eigh(s)
    for order in ((0, 1), (1, 0)):
        res = lt.linalg.eigh(x)
        got, names = calls(lambda: lt.evaluate(*(res[k] for k in order)))
        assert names == ["linalg.eigh"]
        for k, g in zip(order, got):
            np.testing.assert_array_equal(np.asarray(g), (nw, nv)[k])
    u, sv, vh = lt.linalg.svd(x)
    got, names = calls(lambda: lt.evaluate(vh, sv, u))
    assert names == ["linalg.svd"]
    for g, w in zip(got, np.linalg.svd(s)[::-1]):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_explain_shows_one_linalg_step_between_fused_kernels():
    x = lt.asarray(spd())
    text = lt.explain(lt.exp(lt.linalg.inv(x * 2.0 + 1.0)) + 1.0)
    assert text.count("Linalg on cpu: inv((3, 4, 4)) -> (3, 4, 4) float64") == 1
    assert text.count("FusedElementwise") == 2
    steps = text.split("\n[")
    assert "Linalg" in steps[2] and "exp" in steps[3] and "add" in steps[1]


def test_the_root_call_writes_the_destination():
    s = spd()
    x = lt.asarray(s)
    out = lt.empty(s.shape)
    from lazytensor.plan.planner import plan
    from lazytensor.kernels.backend import backend_for
    steps = plan(lt.linalg.inv(x), out.data, backend_for("cpu"))
    assert [type(step) for step in steps] == [LinalgStep] and steps[0].out[0] is out.data
    out[...] = lt.linalg.inv(x)
    np.testing.assert_array_equal(np.asarray(out), np.linalg.inv(s))


def test_a_kept_plan_runs_over_new_tensors():
    out = lt.empty((3, 4))
    recipes.clear()
    for seed in range(3):
        s = spd(seed=seed)
        out[...] = lt.linalg.eigvalsh(lt.asarray(s)) * 2.0 + lt.linalg.det(lt.asarray(s))[..., None]
        np.testing.assert_allclose(np.asarray(out), np.linalg.eigvalsh(s) * 2.0 + np.linalg.det(s)[..., None],
                                   rtol=1e-12)
    assert recipes.count() == 1


def test_views_of_results_read_them_without_a_copy():
    s = spd()
    x = lt.asarray(s)
    q, r = lt.linalg.qr(x)
    text = lt.explain(q[0] + lt.linalg.diagonal(r)[:, :, None][0])
    assert "materialized" not in text
    nq, nr = np.linalg.qr(s)
    np.testing.assert_allclose(np.asarray(q[0] + lt.linalg.diagonal(r)[:, :, None][0]),
                               nq[0] + np.linalg.diagonal(nr)[:, :, None][0], rtol=1e-12)


def test_repr_names_the_function_and_result():
    w, v = lt.linalg.eigh(lt.asarray(spd()))
    assert "linalg.eigh(t0)[1]" in repr(v + 1.0)
    assert "linalg.inv(t0)" in repr(lt.linalg.inv(lt.asarray(spd())))
