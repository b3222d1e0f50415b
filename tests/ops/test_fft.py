"""lt.fft (and np.fft on tensors, and xp.fft) against NumPy's pocketfft on drawn shapes, lengths,
axes and norms: the same shapes and dtypes (float32 and complex64 stay single precision, as in NumPy 2),
values within rounding (NumPy computes the same transform; the values fed to it come from a fused
kernel, whose rounding may differ in the last bit). The transforms are heavy nodes: the elementwise
work around them fuses, and autodiff is not defined for them."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
import lazytensor.array_api as xp

PROFILE = settings(max_examples=20, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
ONE_AXIS = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
MANY_AXES = ["fftn", "ifftn", "rfftn", "irfftn"]
REAL_INPUT = {"rfft", "ihfft", "rfftn"}
RTOL = {np.dtype(np.float32): 2e-5, np.dtype(np.complex64): 2e-5, np.dtype(np.float64): 1e-12,
        np.dtype(np.complex128): 1e-12}


def _operand(draw, fn, shape, dtype):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    real = rng.normal(size=shape)
    if fn in REAL_INPUT:
        return real.astype(dtype)
    return (real + 1j * rng.normal(size=shape)).astype(np.complex64 if dtype == np.float32 else np.complex128)


def _check(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    scale = np.abs(want).max() if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=RTOL[want.dtype] * 10 * max(scale, 1.0))


@pytest.mark.parametrize("fn", ONE_AXIS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["single", "double"])
@PROFILE
@given(data=st.data())
def test_one_axis_transforms_are_numpys(fn, dtype, data):
    shape = tuple(data.draw(st.lists(st.integers(2, 9), min_size=1, max_size=3)))
    a = _operand(data.draw, fn, shape, dtype)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = data.draw(st.one_of(st.none(), st.integers(2, 12)))
    norm = data.draw(st.sampled_from([None, "backward", "ortho", "forward"]))
    want = getattr(np.fft, fn)(a * 2, n=n, axis=axis, norm=norm)
    _check(getattr(lt.fft, fn)(lt.asarray(a) * 2, n=n, axis=axis, norm=norm), want)


@pytest.mark.parametrize("fn", MANY_AXES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["single", "double"])
@PROFILE
@given(data=st.data())
def test_many_axes_transforms_are_numpys(fn, dtype, data):
    shape = tuple(data.draw(st.lists(st.integers(2, 7), min_size=1, max_size=3)))
    a = _operand(data.draw, fn, shape, dtype)
    axes = data.draw(st.one_of(st.none(), st.permutations(range(len(shape))).flatmap(
        lambda p: st.integers(1, len(p)).map(lambda k: tuple(p[:k])))))
    s = None if axes is None else data.draw(st.one_of(st.none(), st.tuples(*[st.integers(2, 8) for _ in axes])))
    norm = data.draw(st.sampled_from([None, "ortho", "forward"]))
    want = getattr(np.fft, fn)(a, s=s, axes=axes, norm=norm)
    _check(getattr(lt.fft, fn)(lt.asarray(a), s=s, axes=axes, norm=norm), want)


def test_np_fft_on_tensors_builds_lazy_nodes():
    a = np.arange(12.0).reshape(3, 4)
    t = lt.asarray(a)
    for fn in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2",
               "rfft2", "irfft2", "fftshift", "ifftshift"):
        got = getattr(np.fft, fn)(t)
        assert isinstance(got, lt.Expr) or (fn.endswith("shift") and isinstance(got, lt.Tensor)), fn
        _check(got, getattr(np.fft, fn)(a))


def test_frequencies_and_shifts_are_numpys():
    for n in (1, 2, 5, 8):
        for d in (1.0, 0.1):
            np.testing.assert_array_equal(np.asarray(lt.fft.fftfreq(n, d)), np.fft.fftfreq(n, d))
            np.testing.assert_array_equal(np.asarray(lt.fft.rfftfreq(n, d)), np.fft.rfftfreq(n, d))
    assert xp.fft.fftfreq(4, d=2.0, dtype=xp.float32).dtype == np.float32
    a = np.arange(30).reshape(5, 6)
    for axes in (None, 0, 1, (0, 1), (-1,)):
        np.testing.assert_array_equal(np.asarray(lt.fft.fftshift(lt.asarray(a), axes)), np.fft.fftshift(a, axes))
        np.testing.assert_array_equal(np.asarray(xp.fft.ifftshift(lt.asarray(a), axes=axes)),
                                      np.fft.ifftshift(a, axes))


def test_array_api_fft_takes_the_standards_signatures():
    a = np.exp(1j * np.linspace(0, 3, 16)).astype(np.complex64)
    _check(xp.fft.fft(xp.asarray(a), n=8, axis=-1, norm="ortho"), np.fft.fft(a, n=8, norm="ortho"))
    _check(xp.fft.irfftn(xp.asarray(a.reshape(4, 4)), s=(4, 6), axes=(0, 1)), np.fft.irfftn(a.reshape(4, 4), s=(4, 6), axes=(0, 1)))
    assert "fft" in dir(xp) and xp.fft.__name__ == "lazytensor.array_api.fft"


def test_work_around_a_transform_fuses_and_the_result_is_written_by_it():
    """exp(x) feeding the transform, abs() of its result: three steps (the operand's kernel, the call,
    the kernel reading it), and values as NumPy's."""
    a = np.linspace(-1, 1, 64)
    y = lt.abs(lt.fft.rfft(lt.exp(lt.asarray(a)))) * 2
    _check(y, np.abs(np.fft.rfft(np.exp(a))) * 2)
    assert "FFT on cpu: rfft" in lt.explain(lt.abs(lt.fft.rfft(lt.exp(lt.asarray(a)))) * 2)


def test_errors_are_numpys():
    with pytest.raises(ValueError, match="Invalid number of FFT data points"):
        lt.fft.fft(lt.asarray(np.ones(4)), n=0)
    with pytest.raises(ValueError, match="norm"):
        lt.fft.fft(lt.asarray(np.ones(4)), norm="bad")
    with pytest.raises(np.exceptions.AxisError):
        lt.fft.fft(lt.asarray(np.ones(4)), axis=1)
