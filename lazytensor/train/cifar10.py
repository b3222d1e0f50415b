"""CIFAR-10 from a local copy in its standard Python pickle format; nothing is downloaded.

The folder `cifar-10-batches-py` (from https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz)
holds data_batch_1 .. data_batch_5 (the 50,000 training images) and test_batch (10,000). Each is a
pickled dict: b"data", a (10000, 3072) uint8 array whose rows are one image's red, green and blue
32 x 32 planes (NCHW order), and b"labels", 10,000 ints in [0, 10).
"""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
FOLDER = "cifar-10-batches-py"
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILES = ("test_batch",)
# The training set's per-channel mean and standard deviation of pixel values in [0, 1].
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def find_folder(path) -> Path:
    """The `cifar-10-batches-py` folder: `path` itself or its child of that name."""
    path = Path(path).expanduser()
    for folder in (path, path / FOLDER):
        if all((folder / name).is_file() for name in TRAIN_FILES + TEST_FILES):
            return folder
    missing = [name for name in TRAIN_FILES + TEST_FILES if not (path / FOLDER / name).is_file()
               and not (path / name).is_file()]
    raise FileNotFoundError(
        f"CIFAR-10 not found at {path}: missing {', '.join(missing)}. lazytensor does not download it. "
        f"Download {URL} and unpack it there (tar xzf cifar-10-python.tar.gz -C {path}), so that "
        f"{path / FOLDER} holds data_batch_1 .. data_batch_5 and test_batch; then pass --data {path}.")


def _read(file: Path):
    with open(file, "rb") as f:
        try:
            batch = pickle.load(f, encoding="bytes")
        except Exception as exc:
            raise ValueError(f"{file} is not a CIFAR-10 pickle batch ({type(exc).__name__}: {exc}); "
                             f"unpack {URL} again") from exc
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise ValueError(f"{file} is not a CIFAR-10 batch: expected a dict with keys b'data' and b'labels'")
    data = np.asarray(batch[b"data"])
    labels = np.asarray(batch[b"labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
        raise ValueError(f"{file}: expected uint8 data of shape (n, 3072) and n labels, got {data.dtype} "
                         f"{data.shape} and {len(labels)} labels")
    return data, labels


def load_cifar10(path, train: bool = True):
    """(images, labels) as NumPy arrays: images uint8 NHWC (n, 32, 32, 3), labels int64 (n,)."""
    folder = find_folder(path)
    parts = [_read(folder / name) for name in (TRAIN_FILES if train else TEST_FILES)]
    data = np.concatenate([d for d, _ in parts])
    labels = np.concatenate([lab for _, lab in parts])
    images = np.ascontiguousarray(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
    return images, labels
