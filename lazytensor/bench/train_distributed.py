"""`python -m lazytensor bench --suite train --nproc N [--device cuda]`: data-parallel training.

Each configuration runs the train command (`python -m lazytensor train`, synthetic data, SGD) in
one process and in N (one per GPU, under mpiexec), the same batch per process, and prints img/s
and the scaling efficiency (N processes' img/s over N times one process's). The peer is PyTorch
DistributedDataParallel (NCCL on CUDA, gloo on the CPU; channels_last, AMP on CUDA) launched with
torchrun on the same devices, eager and with the whole step captured in a CUDA graph, where torch
imports (lazytensor.bench.torch_ddp).

CUDA: VGG16-BN 224 px batch 64 per GPU and ResNet-50 224 px batch 128 per GPU, AMP (float16).
CPU: the small VGG, batch 8 per process, float32: a check that the machinery runs.
LAZYTENSOR_BENCH_QUICK=1 runs a few steps (a smoke test); LAZYTENSOR_BENCH_ONLY picks configurations.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from lazytensor.bench.train import quick

CUDA_CONFIGS = (("VGG16-BN", "vgg16bn", 224, 64), ("ResNet-50", "resnet50", 224, 128))
CPU_CONFIGS = (("small VGG", "small_vgg", 32, 8),)
_SPEED = re.compile(r"steps \d+-\d+: ([\d,.]+) img/s")


def _steps() -> int:
    return 4 if quick() else 40


def lazytensor_img_s(name, px, batch_per_rank, nproc, device, timeout=1800):
    """(img/s of the train command over nproc processes, its output); img/s None where it failed."""
    cmd = [sys.executable, "-m", "lazytensor", "train", "--model", name, "--px", str(px),
           "--batch", str(batch_per_rank * nproc), "--steps", str(_steps()), "--device", device,
           "--nproc", str(nproc), "--log-every", str(_steps())]
    if device == "cuda":
        cmd.append("--amp")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    found = _SPEED.search(done.stdout)
    return (float(found.group(1).replace(",", "")) if found and done.returncode == 0 else None,
            done.stdout + done.stderr)


def torch_ddp_img_s(name, px, batch_per_rank, nproc, device, mode, timeout=1800):
    """img/s of PyTorch DDP under torchrun (None and why where torch or torchrun is missing or it failed)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None, "torch does not import here"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "lazytensor.bench.torch_ddp", "--model", name, "--px", str(px), "--batch", str(batch_per_rank),
           "--steps", str(_steps()), "--device", device, "--mode", mode]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    found = re.search(r"img/s: ([\d.]+)", done.stdout)
    if found is None or done.returncode != 0:
        return None, (done.stdout + done.stderr)[-300:]
    return float(found.group(1)), ""


def _rate(s) -> str:
    return "-" if s is None else f"{s:,.0f}"


def run_distributed_train_bench(print_fn, device: str, nproc: int) -> list:
    if shutil.which("mpiexec") is None and not os.path.exists(os.path.join(os.path.dirname(sys.executable), "mpiexec")):
        print_fn("bench --suite train --nproc: no mpiexec (pip install 'lazytensor[distributed]')")
        return []
    configs = CUDA_CONFIGS if device == "cuda" else CPU_CONFIGS
    only = os.environ.get("LAZYTENSOR_BENCH_ONLY", "")
    lines = [f"data-parallel training over {nproc} processes on {device}" + (" (quick: not a measurement)" if quick()
                                                                             else ""), "",
             "| configuration | implementation | processes | img/s | scaling efficiency | over PyTorch DDP |",
             "|---|---|---:|---:|---:|---:|"]
    rows = []
    for config, name, px, batch in configs:
        label = f"{config} {px}x{px}, batch {batch} per process"
        if only not in label:
            continue
        one, _ = lazytensor_img_s(name, px, batch, 1, device)
        many, output = lazytensor_img_s(name, px, batch, nproc, device)
        if many is None:
            print(output[-3000:], file=sys.stderr)
        peers = [(mode, *torch_ddp_img_s(name, px, batch, nproc, device, mode))
                 for mode in (("eager", "CUDA graph") if device == "cuda" else ("eager",))]
        best = max((s for _, s, _ in peers if s is not None), default=None)
        eff = "-" if one is None or many is None else f"{many / (nproc * one):.3f}"
        lines.append(f"| {label} | lazytensor | 1 | {_rate(one)} | - | - |")
        lines.append(f"| {label} | lazytensor | {nproc} | {_rate(many)} | {eff} | "
                     f"{'-' if best is None or many is None else f'{many / best:.2f}x'} |")
        for mode, speed, why in peers:
            lines.append(f"| {label} | PyTorch DDP {mode} | {nproc} | {_rate(speed)} | - | - |" +
                         (f" {why.splitlines()[-1][:120] if why.strip() else ''}" if speed is None else ""))
        rows.append((label, one, many, peers))
    print_fn("\n".join(lines))
    return rows
