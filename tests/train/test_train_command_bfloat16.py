"""`python -m lazytensor train --amp bfloat16`: a bfloat16 model under lt.train_step(amp="bfloat16")."""
from __future__ import annotations

import importlib
import math

import pytest

from lazytensor.__main__ import main

SMALL = ["train", "--model", "small_vgg", "--px", "32", "--device", "cpu"]


def test_amp_bfloat16_builds_a_bfloat16_model_for_the_step(monkeypatch):
    train_step_module = importlib.import_module("lazytensor.nn.train_step")

    class Recorded(Exception):
        pass

    def record(model, loss_fn, optimizer, *, amp=False):
        raise Recorded({p.dtype.name for p in model.parameters()}, amp)

    monkeypatch.setattr(train_step_module, "train_step", record)
    with pytest.raises(Recorded) as info:
        main(SMALL + ["--amp", "bfloat16", "--batch", "2", "--steps", "1"])
    dtypes, amp = info.value.args
    assert amp == "bfloat16" and "bfloat16" in dtypes and "float32" in dtypes     # BatchNorm's


def test_amp_bfloat16_trains(capsys):
    assert main(SMALL + ["--amp", "bfloat16", "--batch", "4", "--steps", "3", "--log-every", "1"]) == 0
    out = capsys.readouterr().out
    assert "with AMP (bfloat16)" in out
    assert math.isfinite(float(out.split("final loss (step 3): ")[1].split()[0]))


def test_amp_takes_only_float16_or_bfloat16(capsys):
    with pytest.raises(SystemExit):
        main(SMALL + ["--amp", "float8"])
    assert "invalid choice" in capsys.readouterr().err
