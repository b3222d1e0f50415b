"""A tiny CIFAR-10 copy in the standard pickle format, written by the tests that read it."""
from __future__ import annotations

import pickle

import numpy as np

PER_FILE = 3


def write_fake_cifar(root, per_file=PER_FILE, seed=0):
    """root/cifar-10-batches-py with data_batch_1..5 and test_batch as CIFAR-10 writes them: a dict
    of b"data" (n, 3072) uint8 rows of R, G, B planes and b"labels"; returns the rows and labels
    written, training files first."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    written = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (per_file, 3072)).astype(np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, per_file)]
        with open(folder / name, "wb") as f:
            pickle.dump({b"batch_label": name.encode(), b"data": data, b"labels": labels,
                         b"filenames": [b"x.png"] * per_file}, f)
        written[name] = (data, labels)
    return written
