"""The train command and its pieces on CUDA (run with -m gpu on a machine with a GPU)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.__main__ import main
from tests.support.fake_cifar import write_fake_cifar

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")]


def _final_loss(out: str, steps: int) -> float:
    return float(out.split(f"final loss (step {steps}): ")[1].split()[0])


def test_amp_steps_on_synthetic_data(capsys):
    assert main(["train", "--model", "small_vgg", "--batch", "32", "--steps", "12", "--device", "cuda", "--amp",
                 "--explain"]) == 0
    out = capsys.readouterr().out
    assert "on cuda with AMP" in out
    assert "train_step: Sequential" in out and "\namp: on, float16 activations" in out    # --explain's text, on stdout
    assert "peak memory:" in out and "CuPy memory pool high-water mark" in out
    assert math.isfinite(_final_loss(out, 12))


def test_cifar_with_augmentation_on_the_device(tmp_path, capsys):
    write_fake_cifar(tmp_path, per_file=20)
    assert main(["train", "--model", "small_vgg", "--data", str(tmp_path), "--batch", "16", "--steps", "8",
                 "--device", "cuda"]) == 0
    out = capsys.readouterr().out
    assert "CIFAR-10, 100 images resident on the device (random crop and flip on the device)" in out
    assert math.isfinite(_final_loss(out, 8))


def test_peak_memory_sees_an_allocation_and_restores_the_allocator():
    import cupy
    from lazytensor.tools.peak_memory import PeakMemory
    before = cupy.cuda.get_allocator()
    with PeakMemory("cuda") as peak:
        start = peak.bytes
        block = cupy.empty(64 << 20, np.uint8)
        del block
    assert peak.bytes - start >= 64 << 20
    assert cupy.cuda.get_allocator() is before
