"""On-device augmentation (lazytensor.train.augment): random crop with zero padding and horizontal
flip against NumPy (np.pad, slicing, [::-1]) with the same draws."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt
from lazytensor.kernels.ops import DTYPES
from lazytensor.testing.strategies import elements
from lazytensor.train.augment import RandomCropFlip, crop, flip_horizontal, pad

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, NaNs, infinities and signed zeros included: equal bytes."""
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def crop_reference(x, dy, dx, padding):
    n, h, w, _ = x.shape
    p = np.pad(x, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
    return np.stack([p[i, dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(n)])


def flip_reference(x, flips):
    return np.where(flips[:, None, None, None], x[:, :, ::-1], x)


@st.composite
def batches(draw, dtypes=DTYPES):
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    shape = draw(hnp.array_shapes(min_dims=4, max_dims=4, min_side=1, max_side=7))
    x = draw(hnp.arrays(dtype, shape, elements=elements(dtype)))
    if draw(st.booleans()):                        # a view of reversed memory: strides the kernels must follow
        x = np.ascontiguousarray(x[:, ::-1])[:, ::-1]
    return x


@SETTINGS
@given(x=batches(), padding=st.integers(0, 3), data=st.data())
def test_crop_is_numpys_pad_and_slice(x, padding, data):
    n = x.shape[0]
    dy = data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, 2 * padding)))
    dx = data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, 2 * padding)))
    out = lt.evaluate(crop(lt.asarray(x, device="cpu"), lt.asarray(dy, device="cpu"), lt.asarray(dx, device="cpu"),
                           padding))
    assert same_bits(out.numpy(), crop_reference(x, dy, dx, padding))


@SETTINGS
@given(x=batches(), data=st.data())
def test_flip_is_numpys_reversal_and_its_own_inverse(x, data):
    flips = data.draw(hnp.arrays(np.bool_, x.shape[0]))
    t, f = lt.asarray(x, device="cpu"), lt.asarray(flips, device="cpu")
    once = lt.evaluate(flip_horizontal(t, f))
    assert same_bits(once.numpy(), flip_reference(x, flips))
    assert same_bits(lt.evaluate(flip_horizontal(once, f)).numpy(), x)


def test_pad_puts_zeros_around():
    x = np.arange(2 * 3 * 2 * 1, dtype=np.float32).reshape(2, 3, 2, 1) - 3
    np.testing.assert_array_equal(pad(lt.asarray(x, device="cpu"), 2).numpy(),
                                  np.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0))))


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_random_crop_flip_draws_as_numpy_with_the_same_seed(dtype):
    """On the CPU lt.random is NumPy's generator: the same seed gives the same offsets and flips,
    taken in the order dy, dx, flips."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((6, 8, 5, 3)) * 50).astype(dtype)
    out = RandomCropFlip(4, seed=11, device="cpu")(lt.asarray(x, device="cpu"))
    draws = np.random.default_rng(11)
    dy, dx = draws.integers(0, 9, 6), draws.integers(0, 9, 6)
    flips = draws.random(6, dtype=np.float32) < 0.5
    result = lt.evaluate(out).numpy()
    assert result.shape == x.shape and result.dtype == x.dtype
    assert same_bits(result, flip_reference(crop_reference(x, dy, dx, 4), flips))


def test_draws_cover_every_offset_and_both_flips():
    dy, dx, flips = (d.numpy() for d in RandomCropFlip(4, seed=0, device="cpu").draw(2000))
    assert set(dy) == set(dx) == set(range(9))
    assert 0.4 < flips.mean() < 0.6


def test_bad_input_says_what_is_wrong():
    x = lt.asarray(np.zeros((2, 4, 4, 3), np.float32), device="cpu")
    with pytest.raises(ValueError, match=r"expected an NHWC batch \(4 axes\), got shape \(4, 4, 3\)"):
        crop(x[0], lt.zeros((1,), np.int64, "cpu"), lt.zeros((1,), np.int64, "cpu"))
    with pytest.raises(ValueError, match=r"dy must have one value per sample, shape \(2,\); got \(3,\)"):
        crop(x, lt.zeros((3,), np.int64, "cpu"), lt.zeros((2,), np.int64, "cpu"))
    with pytest.raises(ValueError, match=r"flips must have one value per sample"):
        flip_horizontal(x, lt.zeros((1,), bool, "cpu"))
    with pytest.raises(ValueError, match="padding must be >= 0"):
        RandomCropFlip(-1)


@pytest.mark.gpu
def test_random_crop_flip_on_cuda_matches_numpy_with_its_draws():
    if not lt.cuda_usable():
        pytest.skip("needs CuPy and a CUDA device")
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (64, 32, 32, 3)).astype(np.uint8)
    aug = RandomCropFlip(4, seed=3, device="cuda")
    dy, dx, flips = aug.draw(64)
    out = flip_horizontal(crop(lt.asarray(x, device="cuda"), dy, dx, 4), flips)
    expected = flip_reference(crop_reference(x, dy.numpy(), dx.numpy(), 4), flips.numpy())
    assert same_bits(lt.evaluate(out).numpy(), expected)
