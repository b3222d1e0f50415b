"""CIFAR-10 from its Python pickle batches (lazytensor.train.cifar10) and the batches made of it on
the device (lazytensor.train.data), on a tiny fake copy written by the test."""
from __future__ import annotations

import numpy as np
import pytest

import lazytensor as lt

from lazytensor.train.cifar10 import MEAN, STD, URL, find_folder, load_cifar10
from lazytensor.train.data import CifarBatches, SyntheticBatches
from tests.support.fake_cifar import PER_FILE, write_fake_cifar


def test_rows_become_nhwc_images(tmp_path):
    written = write_fake_cifar(tmp_path)
    images, labels = load_cifar10(tmp_path)
    rows = np.concatenate([written[f"data_batch_{i}"][0] for i in range(1, 6)])
    assert images.shape == (5 * PER_FILE, 32, 32, 3) and images.dtype == np.uint8
    assert labels.dtype == np.int64
    np.testing.assert_array_equal(labels, sum((written[f"data_batch_{i}"][1] for i in range(1, 6)), []))
    # pixel (row 4, column 7) of image 2: red at 4 * 32 + 7, green 1024 further, blue 2048 further
    np.testing.assert_array_equal(images[2, 4, 7], rows[2, [4 * 32 + 7, 1024 + 4 * 32 + 7, 2048 + 4 * 32 + 7]])
    np.testing.assert_array_equal(images, rows.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))


def test_test_batch_and_the_folder_itself(tmp_path):
    written = write_fake_cifar(tmp_path)
    images, labels = load_cifar10(tmp_path / "cifar-10-batches-py", train=False)
    assert images.shape == (PER_FILE, 32, 32, 3)
    np.testing.assert_array_equal(labels, written["test_batch"][1])


def test_missing_data_says_where_to_put_it(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        load_cifar10(tmp_path)
    text = str(info.value)
    for what in (URL, str(tmp_path / "cifar-10-batches-py"), "data_batch_1", "test_batch", "does not download"):
        assert what in text


def test_a_missing_file_is_named(tmp_path):
    write_fake_cifar(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(FileNotFoundError, match="missing data_batch_3"):
        find_folder(tmp_path)


def test_a_file_that_is_not_a_batch(tmp_path):
    write_fake_cifar(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_2").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="data_batch_2 is not a CIFAR-10 pickle batch"):
        load_cifar10(tmp_path)


def test_batches_cover_each_epoch_once_normalized(tmp_path):
    """Without augmentation, an epoch is the images in the order of NumPy's permutation with the
    same seed, each normalized as (x / 255 - mean) / std; the last incomplete batch is dropped."""
    write_fake_cifar(tmp_path)
    images, labels = load_cifar10(tmp_path)
    source = CifarBatches(images, labels, 4, device="cpu", augment=False, seed=7)
    it = iter(source)
    perm = np.random.default_rng(7).permutation(len(images))
    expected = (images[perm].astype(np.float64) / 255 - np.asarray(MEAN)) / np.asarray(STD)
    for b in range(len(images) // 4):
        x, y = next(it)
        assert x.dtype == np.float32 and x.shape == (4, 32, 32, 3)
        np.testing.assert_allclose(np.asarray(x), expected[4 * b:4 * b + 4], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(np.asarray(y), labels[perm][4 * b:4 * b + 4])
    x, _ = next(it)                                  # the next epoch: a new order
    second = np.random.default_rng(7)
    second.permutation(len(images))
    np.testing.assert_allclose(np.asarray(x), expected[np.argsort(perm)][second.permutation(len(images))][:4],
                               rtol=1e-5, atol=1e-5)


def test_augmented_batches_keep_shape_and_labels(tmp_path):
    write_fake_cifar(tmp_path)
    images, labels = load_cifar10(tmp_path)
    x, y = next(iter(CifarBatches(images, labels, 5, device="cpu", augment=True, seed=1)))
    assert x.shape == (5, 32, 32, 3) and x.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(y), labels[np.random.default_rng(1).permutation(len(images))][:5])


def test_a_batch_larger_than_the_data(tmp_path):
    write_fake_cifar(tmp_path)
    images, labels = load_cifar10(tmp_path)
    with pytest.raises(ValueError, match="batch 100 is larger than the data set"):
        CifarBatches(images, labels, 100, device="cpu")


def test_synthetic_batches_are_fixed_and_cycle():
    source = SyntheticBatches(3, 8, 10, device="cpu", count=2, seed=4)
    it = iter(source)
    seen = [next(it) for _ in range(4)]
    assert seen[0][0] is seen[2][0] and seen[1][1] is seen[3][1]
    x, y = seen[0]
    assert x.shape == (3, 8, 8, 3) and x.dtype == np.float32 and y.dtype == np.int64
    assert ((np.asarray(y) >= 0) & (np.asarray(y) < 10)).all()
    rng = np.random.default_rng(4)
    np.testing.assert_array_equal(np.asarray(x), rng.standard_normal((3, 8, 8, 3), dtype=np.float32))


class ChannelMeans:
    """A stand-in model: logits are each image's per-channel means (3 classes), so NumPy can tell
    what it predicts; it records the modes it is called in."""

    def __init__(self):
        self.weight = lt.ones((1,), np.float32, "cpu")
        self.training, self.seen = True, []

    def parameters(self):
        return [self.weight]

    def eval(self):
        self.training = False

    def train(self, mode=True):
        self.training = mode

    def __call__(self, x):
        self.seen.append((self.training, tuple(x.shape)))
        return x.mean(axis=(1, 2)).astype(np.float32) * self.weight


def test_test_accuracy_in_eval_mode_against_numpy(tmp_path):
    write_fake_cifar(tmp_path, per_file=7)
    images, labels = load_cifar10(tmp_path, train=False)
    labels = labels % 3
    model = ChannelMeans()
    accuracy = CifarBatches(images, labels, 3, device="cpu", augment=False).test_accuracy(model, images, labels)
    normalized = (images / 255 - np.asarray(MEAN)) / np.asarray(STD)
    expected = np.mean(normalized.mean(axis=(1, 2)).argmax(axis=1) == labels)
    assert 0 < expected < 1 and accuracy == pytest.approx(expected)
    assert model.seen == [(False, (3, 32, 32, 3)), (False, (3, 32, 32, 3)), (False, (1, 32, 32, 3))]
    assert model.training
