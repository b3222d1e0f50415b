"""logsumexp, log_softmax, softmax and cross_entropy against NumPy references: direct float64 formulas
on hypothesis-drawn values (odd shapes, any axis, float32/float64), large values that overflow the
direct formula, and the special cases (-inf, +inf, NaN); the plan (three steps, no more); errors;
gradients through lt.grad against central finite differences once lt.grad exists."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt
import lazytensor.autodiff
from tests.support.oracles import finite_differences

grad = getattr(lazytensor.autodiff, "grad", None) or getattr(lt, "grad", None)
needs_grad = pytest.mark.skipif(grad is None, reason="lt.grad (lazytensor.autodiff.reverse) has not landed yet")
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOL = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-13}


def _lse(x, axis, keepdims=False):
    """The direct formula in float64 (the drawn values are small enough not to overflow it)."""
    return np.log(np.sum(np.exp(x.astype(np.float64)), axis=axis, keepdims=keepdims))


def _close(ours, want, dtype):
    ours = np.asarray(ours)
    assert ours.dtype == dtype and ours.shape == want.shape
    np.testing.assert_allclose(ours.astype(np.float64), want, rtol=4 * TOL[dtype], atol=4 * TOL[dtype])


# Kernels are compiled per structure (ndim, axis, dtype), not per size: the sizes vary freely, the
# structures are a few, so that the test compiles a handful of kernels.
STRUCTURES = [("float32", 2, -1), ("float64", 3, 1)]


@SETTINGS
@given(st.sampled_from(STRUCTURES), st.data(), st.integers(0, 2**16))
def test_softmax_family_matches_the_formulas(structure, data, seed):
    dtype, ndim, axis = structure
    shape = data.draw(hnp.array_shapes(min_dims=ndim, max_dims=ndim, min_side=1, max_side=7))
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    t = lt.asarray(x, device="cpu")
    _close(lt.logsumexp(t, axis), _lse(x, axis), x.dtype)
    _close(lt.logsumexp(t, axis, keepdims=True), _lse(x, axis, True), x.dtype)
    _close(lt.log_softmax(t, axis), x - _lse(x, axis, True), x.dtype)
    _close(lt.softmax(t, axis), np.exp(x.astype(np.float64)) / np.exp(x.astype(np.float64)).sum(axis, keepdims=True),
           x.dtype)


def test_logsumexp_over_several_axes_and_all():
    x = np.random.default_rng(1).standard_normal((3, 4, 5))
    t = lt.asarray(x, device="cpu")
    _close(lt.logsumexp(t, (0, 2)), _lse(x, (0, 2)), x.dtype)
    _close(lt.logsumexp(t, None), _lse(x, None), x.dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_no_overflow_and_special_values(dtype):
    big = np.finfo(dtype).max / 4
    x = np.array([[1000.0, 1000.0, 999.0],          # exp overflows the direct formula
                  [-1000.0, -1001.0, -1002.0],      # exp underflows it
                  [-np.inf, -np.inf, -np.inf],      # all -inf: logsumexp -inf, softmax NaN (0 / 0)
                  [np.inf, 0.0, 1.0],               # +inf: logsumexp +inf
                  [np.nan, 0.0, 1.0],               # NaN: NaN
                  [big, big, -np.inf]], dtype=dtype)  # near the top of the range, and a -inf: probability 0
    t = lt.asarray(x, device="cpu")
    lse = np.asarray(lt.logsumexp(t))
    np.testing.assert_allclose(lse[:2], [1000 + np.log(2 + np.exp(-1)), -1000 + np.log(1 + np.exp(-1) + np.exp(-2))],
                               rtol=TOL[np.dtype(dtype)])
    assert lse[2] == -np.inf and lse[3] == np.inf and np.isnan(lse[4])
    np.testing.assert_allclose(lse[5], np.log(2) + np.float64(big), rtol=TOL[np.dtype(dtype)])
    sm = np.asarray(lt.softmax(t))
    np.testing.assert_allclose(sm[0], np.array([1, 1, np.exp(-1)]) / (2 + np.exp(-1)), rtol=4 * TOL[np.dtype(dtype)])
    np.testing.assert_allclose(sm[5], [0.5, 0.5, 0.0])
    assert np.isnan(sm[2]).all() and np.isnan(sm[4]).all()
    np.testing.assert_array_equal(sm[3], [np.nan, 0.0, 0.0])   # inf / inf, as scipy.special.softmax
    lsm = np.asarray(lt.log_softmax(t))
    np.testing.assert_allclose(lsm[1], [0, -1, -2] - np.log(1 + np.exp(-1) + np.exp(-2)), rtol=4 * TOL[np.dtype(dtype)])
    assert lsm[5, 2] == -np.inf and np.isnan(lsm[2]).all()


def test_softmax_is_two_reductions_and_one_kernel():
    t = lt.asarray(np.random.default_rng(2).standard_normal((8, 10)).astype(np.float32), device="cpu")
    kinds = [(type(s).__name__, getattr(getattr(s, "spec", None), "kind", None)) for s in lt.explain(lt.softmax(t)).steps]
    assert kinds == [("FusedReduction", "max"), ("FusedReduction", "sum"), ("FusedElementwise", None)]


def _cross_entropy_reference(x, labels):
    x = x.astype(np.float64)
    return float(np.mean(_lse(x, 1) - x[np.arange(len(labels)), labels]))


@SETTINGS
@given(st.integers(1, 9), st.integers(1, 7), st.sampled_from([("float32", "int64"), ("float64", "int32")]),
       st.integers(0, 2**16))
def test_cross_entropy_matches_reference(n, c, dtypes, seed):
    dtype, label_dtype = dtypes
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c)) * 3).astype(dtype)
    labels = rng.integers(0, c, size=n).astype(label_dtype)
    loss = lt.cross_entropy(lt.asarray(x, device="cpu"), lt.asarray(labels, device="cpu"))
    assert loss.shape == () and loss.dtype == x.dtype
    _close(loss, np.array(_cross_entropy_reference(x, labels)), x.dtype)


def test_cross_entropy_out_of_range_label_is_nan_and_bad_input_errors():
    x = lt.asarray(np.zeros((3, 4), np.float32), device="cpu")
    assert np.isnan(float(lt.cross_entropy(x, lt.asarray(np.array([0, 4, 1]), device="cpu"))))
    assert np.isnan(float(lt.cross_entropy(x, lt.asarray(np.array([0, -1, 1]), device="cpu"))))
    with pytest.raises(TypeError, match="integer class labels"):
        lt.cross_entropy(x, lt.asarray(np.zeros(3, np.float32), device="cpu"))
    with pytest.raises(ValueError, match=r"labels must have shape \(3,\)"):
        lt.cross_entropy(x, lt.asarray(np.zeros(4, np.int64), device="cpu"))
    with pytest.raises(ValueError, match=r"\(batch, classes\)"):
        lt.cross_entropy(lt.asarray(np.zeros(4, np.float32), device="cpu"), lt.asarray(np.zeros(4, np.int64), device="cpu"))
    with pytest.raises(TypeError, match="floating-point"):
        lt.softmax(lt.asarray(np.zeros(4, np.int32), device="cpu"))


@needs_grad
def test_grad_of_cross_entropy_matches_finite_differences():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 4))
    labels = np.array([0, 3, 1, 1, 2])
    tx = lt.asarray(x, device="cpu")
    (gx,) = grad(lt.cross_entropy(tx, lt.asarray(labels, device="cpu")), [tx])
    want = finite_differences(lambda x: _cross_entropy_reference(x, labels), [x], 0)
    np.testing.assert_allclose(np.asarray(gx), want, rtol=1e-6, atol=1e-8)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(gx), (e / e.sum(1, keepdims=True) - np.eye(4)[labels]) / 5, rtol=1e-10)


@needs_grad
@pytest.mark.parametrize("fn", ["logsumexp", "log_softmax", "softmax"])
def test_grad_of_softmax_family_matches_finite_differences(fn):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 5))
    ref = {"logsumexp": lambda x: _lse(x, 0), "log_softmax": lambda x: x - _lse(x, 0, True),
           "softmax": lambda x: np.exp(x - _lse(x, 0, True))}[fn]
    w = rng.standard_normal(ref(x).shape)
    tx = lt.asarray(x, device="cpu")
    (gx,) = grad((getattr(lt, fn)(tx, 0) * lt.asarray(w, device="cpu")).sum(), [tx])
    want = finite_differences(lambda x: float(np.sum(ref(x) * w)), [x], 0)
    np.testing.assert_allclose(np.asarray(gx), want, rtol=1e-6, atol=1e-8)
