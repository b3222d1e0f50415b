"""`python -m lazytensor train`: train a network on synthetic data or CIFAR-10 with lt.train_step.

    python -m lazytensor train --model vgg16bn --px 32 --batch 512 --steps 200 --device cuda --amp
    python -m lazytensor train --model vgg16bn --px 32 --batch 512 --steps 200 --device cuda --amp bfloat16
    python -m lazytensor train --model resnet18 --data ~/datasets --batch 256 --steps 1000

The data live on the device (see lazytensor.train.data); the optimizer is SGD with momentum
and weight decay. A tqdm bar shows img/s and the loss, read from the device every --log-every steps
(each read waits for the device; the steps between them are queued without a host sync). The
summary's img/s leaves out the first two steps: lt.train_step plans the step and compiles its
kernels on the first, and on CUDA captures it as a graph on the second.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import numpy as np

from lazytensor.core.dtypes import BFLOAT16
from lazytensor.train.models import MODELS

PIXELS = (32, 224)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def add_train_command(sub) -> argparse.ArgumentParser:
    """The `train` subcommand's parser, added to __main__'s subparsers."""
    p = sub.add_parser("train", help="train VGG16-BN or ResNet with lt.train_step (synthetic data or CIFAR-10)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=MODELS, default="vgg16bn",
                   help="vgg16bn (the CIFAR variant at 32 px), resnet18, resnet50, or small_vgg (a VGG in "
                        "miniature for quick runs on a CPU)")
    p.add_argument("--px", type=int, choices=PIXELS, default=32, help="image side: 32 (CIFAR-10) or 224")
    p.add_argument("--batch", type=_positive_int, default=128, help="images per step (default 128)")
    p.add_argument("--steps", type=_positive_int, default=100, help="training steps (default 100)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda where usable, else cpu")
    p.add_argument("--data", metavar="PATH", default=None,
                   help="CIFAR-10 in its Python pickle format: PATH or PATH/cifar-10-batches-py holds data_batch_1 "
                        ".. data_batch_5 and test_batch (default: synthetic data)")
    p.add_argument("--amp", nargs="?", const="float16", default=None, choices=["float16", "bfloat16"],
                   help="mixed precision: float16 (--amp alone) or bfloat16 weights and activations, float32 master "
                        "weights and BatchNorm; float16 with dynamic loss scaling, bfloat16 without")
    p.add_argument("--lr", type=_non_negative_float, default=0.05, help="SGD learning rate (default 0.05)")
    p.add_argument("--momentum", type=_non_negative_float, default=0.9, help="SGD momentum (default 0.9)")
    p.add_argument("--weight-decay", type=_non_negative_float, default=5e-4, help="SGD weight decay (default 5e-4)")
    p.add_argument("--augment", action=argparse.BooleanOptionalAction, default=None,
                   help="random crop (4-pixel zero padding) and horizontal flip on the device (default: on with "
                        "--data, off on synthetic data)")
    p.add_argument("--test", action="store_true",
                   help="with --data: after training, the accuracy on CIFAR-10's test_batch (10,000 images)")
    p.add_argument("--seed", type=int, default=0, help="seeds the weights, the data and the augmentation (default 0)")
    p.add_argument("--log-every", type=_positive_int, default=10, metavar="N",
                   help="read the loss from the device every N steps (default 10)")
    p.add_argument("--nproc", type=_positive_int, default=None, metavar="N",
                   help="data parallel over N processes: re-launches itself under the mpiexec of the distributed "
                        "extra (or runs under an external mpiexec/torchrun); --batch is the global batch, sharded "
                        "by rank; rank 0 prints")
    p.add_argument("--sync-bn", action="store_true",
                   help="BatchNorm statistics over the global batch (lt.nn.SyncBatchNorm), not per process")
    p.add_argument("--print-losses", action="store_true", help="print each loss read (8 significant digits)")
    p.add_argument("--explain", action="store_true",
                   help="print lt.explain of the planned step (after the warm-up): its steps by kind, memory, graphs")
    p.add_argument("--explain-detail", action="store_true",
                   help="print lt.explain of the planned step with each of its steps (implies --explain)")
    return p


def check_train_arguments(parser: argparse.ArgumentParser, args) -> None:
    """Errors argparse cannot see alone; each exits with usage and says what to do."""
    if args.data is not None and args.px != 32:
        parser.error(f"--px {args.px} with --data: CIFAR-10 images are 32 x 32; use --px 32, or leave out --data "
                     f"to train on synthetic {args.px} x {args.px} images")
    if args.data is not None:
        from lazytensor.train.cifar10 import find_folder
        try:
            find_folder(args.data)
        except FileNotFoundError as exc:
            parser.error(f"--data: {exc}")
    if args.test and args.data is None:
        parser.error("--test measures the accuracy on CIFAR-10's test set: give --data PATH")
    if args.nproc and args.batch % args.nproc:
        parser.error(f"--batch {args.batch} is the global batch: it must divide by --nproc {args.nproc}")
    if args.device == "cuda":
        from lazytensor.kernels.backend import cuda_usable
        if not cuda_usable():
            parser.error("--device cuda: no usable CUDA device here (lazytensor's CUDA path needs an NVIDIA GPU "
                         "and the cuda extra: pip install -e '.[cuda]'); use --device cpu")


@dataclass
class TrainReport:
    """What a run did: `losses` are (step, loss) at each read; `images_per_s` leaves out the
    `warmup_steps` (None when no step came after them)."""
    model: str
    device: str
    batch: int
    steps: int
    warmup_steps: int
    warmup_s: float
    images_per_s: float | None
    final_loss: float
    peak_memory: str
    losses: list = field(default_factory=list)
    test_accuracy: float | None = None


def _data_source(args, num_classes: int, device: str):
    from lazytensor.train.data import CifarBatches, SyntheticBatches
    if args.data is None:
        return SyntheticBatches(args.batch, args.px, num_classes, device, seed=args.seed, augment=bool(args.augment))
    from lazytensor.train.cifar10 import load_cifar10
    images, labels = load_cifar10(args.data, train=True)
    augment = True if args.augment is None else args.augment
    return CifarBatches(images, labels, args.batch, device, augment=augment, seed=args.seed)


def _progress_bar(steps: int, batch: int, show: bool):
    from tqdm.auto import tqdm
    return tqdm(total=steps * batch, unit="img", desc="train", disable=not show)


def run_train(args, print_fn=print, show_bar: bool = True) -> TrainReport:
    """Builds the model, the data and lt.train_step, runs args.steps steps, prints a summary."""
    from lazytensor.kernels.backend import default_device
    from lazytensor.nn.optim import SGD
    from lazytensor.nn.train_step import train_step
    from lazytensor.ops.softmax import cross_entropy
    from lazytensor.tools.explain import explain
    from lazytensor.tools.peak_memory import PeakMemory
    from lazytensor.train.models import build_model

    from lazytensor.kernels.collectives import group
    g = group()
    distributed = g.size > 1 or bool(getattr(args, "sync_bn", False)) or bool(getattr(args, "nproc", None))
    if g.rank != 0:         # one progress bar, one summary: rank 0's
        print_fn, show_bar = (lambda *a, **k: None), False
    device = args.device or default_device()
    if device == "cuda" and g.size > 1:
        import cupy
        cupy.cuda.Device(g.local_rank % cupy.cuda.runtime.getDeviceCount()).use()
    num_classes = 10 if args.px == 32 else 1000
    with PeakMemory(device) as peak:
        data = _data_source(args, num_classes, device)
        dtype = {None: np.float32, "float16": np.float16, "bfloat16": BFLOAT16}[args.amp]
        model = build_model(args.model, args.px, num_classes, dtype=dtype, device=device, seed=args.seed)
        if getattr(args, "sync_bn", False):
            from lazytensor.nn.sync_batch_norm import convert_sync_batchnorm
            convert_sync_batchnorm(model)
        optimizer = SGD(model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
        parallel = {"distributed": True} if distributed else {}
        step = train_step(model, cross_entropy, optimizer, amp={None: False, "float16": True}.get(args.amp, args.amp),
                          **parallel)
        if distributed:
            print_fn(f"data parallel: {g.size} processes ({g.launcher}), {args.batch // g.size} images each per step"
                     f"{', synchronized BatchNorm' if args.sync_bn else ', BatchNorm statistics per process'}")
        print_fn(f"train {args.model}, {args.px} px, batch {args.batch}, {args.steps} steps on {device}"
                 f"{f' with AMP ({args.amp})' if args.amp else ''}: {data.describe()}; SGD lr {args.lr}, momentum "
                 f"{args.momentum}, weight decay {args.weight_decay}")
        losses, batches = [], iter(data)
        bar = _progress_bar(args.steps, args.batch, show_bar)
        # lt.train_step plans and runs the step on its first call, and on CUDA captures its graph on the
        # second: those are the warm-up, timed apart from the steps after them.
        warmup, done = (2 if args.steps > 2 else 1), 0
        try:
            start = time.perf_counter()
            for i in range(1, args.steps + 1):
                x, labels = next(batches)
                if g.size > 1:
                    m = args.batch // g.size
                    x, labels = x[g.rank * m:(g.rank + 1) * m], labels[g.rank * m:(g.rank + 1) * m]
                loss = step(x, labels)
                done = i
                if i == warmup or i % args.log_every == 0 or i == args.steps:
                    losses.append((i, float(loss)))          # waits for the device
                    if getattr(args, "print_losses", False):
                        print_fn(f"loss at step {i}: {losses[-1][1]:.8g}")
                    bar.set_postfix(loss=f"{losses[-1][1]:.4f}", refresh=False)
                bar.update(args.batch)
                if i == warmup:
                    warmup_s = time.perf_counter() - start
                    if args.explain or args.explain_detail:
                        print_fn(explain(step, source=False, detail=True if args.explain_detail else None))
                    start = time.perf_counter()
        except KeyboardInterrupt:     # lt.train_step ends the step it is in first: the weights are whole
            if done == 0:
                raise
            bar.close()
            print_fn(f"interrupted: stopping after step {done}")
        finally:
            bar.close()
        if not losses or losses[-1][0] != done:      # interrupted between two reads
            losses.append((done, float(loss)))
        seconds = time.perf_counter() - start         # the last step's loss was read: the device is done
        if done < warmup:
            warmup, warmup_s = done, seconds
        accuracy = None
        if args.test:
            from lazytensor.train.cifar10 import load_cifar10
            accuracy = data.test_accuracy(model, *load_cifar10(args.data, train=False))
    rate = (done - warmup) * args.batch / seconds if done > warmup else None
    report = TrainReport(args.model, device, args.batch, done, warmup, warmup_s, rate, losses[-1][1],
                         peak.describe(), losses, accuracy)
    print_fn(format_summary(report))
    return report


def relaunch(args, argv) -> int | None:
    """With --nproc N > 1 outside a launcher: run this command under mpiexec -n N and return its exit
    status; None when this process is to train (N is 1, or a launcher started it)."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path
    if not args.nproc or args.nproc == 1 or "PMI_RANK" in os.environ or "OMPI_COMM_WORLD_RANK" in os.environ \
            or "RANK" in os.environ:
        return None
    here = Path(sys.executable).parent / "mpiexec"
    mpiexec = str(here) if here.exists() else shutil.which("mpiexec")
    if mpiexec is None:
        raise SystemExit("--nproc: no mpiexec found; install the distributed extra: pip install 'lazytensor[distributed]'")
    return subprocess.call([mpiexec, "-n", str(args.nproc), sys.executable, "-m", "lazytensor"] + list(argv))


def format_summary(r: TrainReport) -> str:
    capture = ", capturing the CUDA graph" if r.device == "cuda" and r.warmup_steps > 1 else ""
    first = "first step" if r.warmup_steps == 1 else f"first {r.warmup_steps} steps"
    lines = [f"{first} (planning, compiling kernels{capture}): {r.warmup_s:.2f} s"]
    if r.images_per_s is not None:
        ms = r.batch / r.images_per_s * 1e3
        lines.append(f"steps {r.warmup_steps + 1}-{r.steps}: {r.images_per_s:,.1f} img/s ({ms:.2f} ms per step)")
    lines.append(f"final loss (step {r.steps}): {r.final_loss:.4f}")
    if r.test_accuracy is not None:
        lines.append(f"test accuracy: {100 * r.test_accuracy:.2f}% (CIFAR-10's test_batch, eval mode)")
    lines.append(f"peak memory: {r.peak_memory}")
    return "\n".join(lines)
