"""`python -m lazytensor train`: its argument errors, and short runs on the CPU (synthetic data and
a fake CIFAR-10 copy)."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

import lazytensor as lt
from lazytensor.__main__ import main
from tests.support.fake_cifar import write_fake_cifar

SMALL = ["train", "--model", "small_vgg", "--px", "32", "--device", "cpu"]


@pytest.mark.parametrize("argv, message", [
    (["--px", "64"], "argument --px: invalid choice: 64"),
    (["--batch", "0"], "argument --batch: expected a positive integer, got 0"),
    (["--steps", "many"], "argument --steps: expected a positive integer, got 'many'"),
    (["--model", "vgg19"], "argument --model: invalid choice: 'vgg19'"),
    (["--lr", "-0.1"], "argument --lr: expected a number >= 0, got -0.1"),
    (["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["--log-every", "0"], "argument --log-every: expected a positive integer, got 0"),
])
def test_argument_errors_name_the_argument(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(["train"] + argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_cifar_at_224_px_is_refused(tmp_path, capsys):
    write_fake_cifar(tmp_path)
    with pytest.raises(SystemExit):
        main(["train", "--data", str(tmp_path), "--px", "224"])
    assert "--px 224 with --data: CIFAR-10 images are 32 x 32; use --px 32" in capsys.readouterr().err


def test_missing_cifar_says_where_to_put_it(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--data", str(tmp_path)])
    err = capsys.readouterr().err
    assert "--data: CIFAR-10 not found" in err and "cifar-10-python.tar.gz" in err and "data_batch_1" in err


def test_test_accuracy_needs_cifar(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--test"])
    assert "--test measures the accuracy on CIFAR-10's test set: give --data PATH" in capsys.readouterr().err


@pytest.mark.skipif(lt.cuda_usable(), reason="CUDA is usable here")
def test_cuda_without_a_gpu(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--device", "cuda"])
    assert "--device cuda: no usable CUDA device here" in capsys.readouterr().err


def test_a_few_steps_on_synthetic_data(capsys):
    assert main(SMALL + ["--batch", "4", "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "train small_vgg, 32 px, batch 4, 2 steps on cpu: synthetic data" in out
    assert "steps 2-2:" in out and "img/s" in out and "peak memory:" in out
    loss = float(out.split("final loss (step 2): ")[1].split()[0])
    assert math.isfinite(loss)


def test_a_few_steps_on_cifar_with_augmentation(tmp_path, capsys):
    write_fake_cifar(tmp_path)
    assert main(SMALL + ["--data", str(tmp_path), "--batch", "4", "--steps", "5", "--log-every", "2",
                         "--explain", "--test"]) == 0
    out = capsys.readouterr().out
    assert "CIFAR-10, 15 images resident on the device (random crop and flip on the device)" in out
    assert "train_step: Sequential" in out             # lt.explain of the step
    assert "steps 3-5:" in out and "final loss (step 5)" in out
    assert "test accuracy: " in out and "% (CIFAR-10's test_batch, eval mode)" in out


def test_explain_prints_the_steps_by_kind_and_explain_detail_each_step(capsys):
    assert main(SMALL + ["--batch", "2", "--steps", "1", "--explain"]) == 0
    summary = capsys.readouterr().out
    assert "train_step: Sequential" in summary and "steps by kind (" in summary and "\n[1] " not in summary
    assert main(SMALL + ["--batch", "2", "--steps", "1", "--explain-detail"]) == 0
    full = capsys.readouterr().out
    assert "train_step: Sequential" in full and "\n[1] " in full and "steps by kind" not in full


def test_the_report_holds_the_losses_read():
    from lazytensor.train.command import run_train
    import argparse
    parser = argparse.ArgumentParser()
    from lazytensor.train.command import add_train_command
    args = add_train_command(parser.add_subparsers()).parse_args(
        ["--model", "small_vgg", "--device", "cpu", "--batch", "3", "--steps", "4", "--log-every", "2"])
    lines = []
    report = run_train(args, lines.append, show_bar=False)
    assert [i for i, _ in report.losses] == [2, 4]          # the end of the warm-up, then every 2 steps
    assert report.final_loss == report.losses[-1][1] and report.images_per_s > 0
    assert lines[-1].startswith("first 2 steps (planning, compiling kernels): ")
    assert lines[-1].splitlines()[1].startswith("steps 3-4: ")


def test_vgg16bn_is_built_for_its_input_size(monkeypatch):
    """At 32 px, lt.nn.vgg16_bn's CIFAR variant: its classifier reads the 1 x 1 x 512 last feature map."""
    import lazytensor.train.models as models
    calls = []
    monkeypatch.setattr(models, "vgg16_bn", lambda *a, **k: calls.append((a, k)))
    models.build_model("vgg16bn", 32, 10, device="cpu")
    models.build_model("vgg16bn", 224, 1000, device="cpu")
    assert [(a, k["input_size"]) for a, k in calls] == [((10,), 32), ((1000,), 224)]


def test_the_command_line_is_wired():
    done = subprocess.run([sys.executable, "-m", "lazytensor", "train", "--batch", "0"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "expected a positive integer, got 0" in done.stderr


def test_amp_builds_a_float16_model_for_the_step(monkeypatch):
    """lt.train_step's AMP computes with a float16 model (float32 master weights in the optimizer)."""
    import importlib
    train_step_module = importlib.import_module("lazytensor.nn.train_step")   # lt.nn.train_step is the function

    class Recorded(Exception):
        pass

    def record(model, loss_fn, optimizer, *, amp=False):
        raise Recorded({p.dtype.name for p in model.parameters()}, amp)

    monkeypatch.setattr(train_step_module, "train_step", record)
    with pytest.raises(Recorded) as info:
        main(SMALL + ["--amp", "--batch", "2", "--steps", "1"])
    dtypes, amp = info.value.args
    assert amp is True and "float16" in dtypes


def test_ctrl_c_stops_after_the_step_and_reports_it(monkeypatch, capsys):
    import importlib
    train_step_module = importlib.import_module("lazytensor.nn.train_step")
    real = train_step_module.train_step

    def interrupted_at_call_5(*args, **kwargs):
        step, calls = real(*args, **kwargs), []

        def call(x, labels):
            calls.append(1)
            if len(calls) == 5:
                raise KeyboardInterrupt
            return step(x, labels)
        return call

    monkeypatch.setattr(train_step_module, "train_step", interrupted_at_call_5)
    assert main(SMALL + ["--batch", "2", "--steps", "10"]) == 0
    out = capsys.readouterr().out
    assert "interrupted: stopping after step 4" in out
    assert "steps 3-4: " in out and math.isfinite(_loss(out, 4))


def _loss(out, step):
    return float(out.split(f"final loss (step {step}): ")[1].split()[0])
