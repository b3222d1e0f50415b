"""A steady `y[...] = e` (the kernel compiled, the plan kept) stays a few Python calls: the
assignment's cost on small arrays is the interpreter's, so each call on this path counts."""
import os
import sys

import numpy as np
import pytest

import lazytensor as lt


def python_frames(f) -> list:
    """(file, function) of each Python function that calling f enters."""
    entered = []

    def record(frame, event, arg):
        if event == "call":
            entered.append((frame.f_code.co_filename, frame.f_code.co_name))

    sys.setprofile(record)
    try:
        f()
    finally:
        sys.setprofile(None)
    return entered


@pytest.mark.compiled_tier
def test_a_steady_assignment_is_five_python_calls_in_four_files():
    rng = np.random.default_rng(0)
    a, b, c, y = (lt.asarray(rng.standard_normal(1024), device="cpu") for _ in range(4))
    e = a + b * c
    for _ in range(20):
        y[...] = a + b * c

    def write():
        y[...] = e

    frames = [(f, name) for f, name in python_frames(write) if f != __file__]
    where = "\n".join(f"{os.path.basename(f)}:{name}" for f, name in frames)
    assert len(frames) <= 5, where
    assert len({f for f, _ in frames}) <= 4, where
    np.testing.assert_array_equal(y.numpy(), a.numpy() + b.numpy() * c.numpy())
