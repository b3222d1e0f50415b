"""`python -m lazytensor bench --suite train [--device cuda] [--quick]`: whole training steps.

CUDA: VGG16-BN at 32 x 32 with batch 512 and at 224 x 224 with batch 64, ResNet-50 at 224 x 224 with
batch 128. lazytensor's lt.train_step with AMP against PyTorch AMP (float16 autocast, channels_last)
in three modes, in the same run:
- eager: autocast + GradScaler, the usual loop;
- CUDA graph: the whole step (forward, backward, SGD) captured once with torch.cuda.graph after a
  warm-up on a side stream, static input buffers copied into before each replay, as PyTorch's
  notes on CUDA graphs show ("whole network capture"). GradScaler cannot be captured (its step
  reads the overflow flag on the host), so this mode runs float16 autocast without loss scaling;
- torch.compile of the model, with the eager mode's loop.
Every PyTorch mode runs with torch.backends.cudnn.benchmark = True (each conv shape timed once for
its fastest algorithm), as lazytensor takes its conv plans from tuned experience tables; --quick,
which measures nothing, skips that tuning.
Each row gives img/s, lazytensor's speed over that row, and the peak device memory: for torch,
torch.cuda.max_memory_allocated; for lazytensor, the high-water mark of its CuPy pool's used bytes.
Every implementation runs SGD (momentum 0.9, weight decay 5e-4) on the same synthetic batch, and is
timed with CUDA events over bursts of back-to-back steps (lazytensor.kernels.timing).

CPU: a VGG in miniature at batch 8 and ResNet-18 at 32 x 32 with batch 16, lazytensor in float32
against PyTorch eager where torch imports, with its default threads and with one thread. Each is
timed by its least process CPU time (all threads) over 15 steps: on a machine whose cores other
work shares, the wall clock counts that work too (docs/design/training-step.md, "On the CPU").

--dtype bfloat16 (CUDA; also --amp bfloat16) runs both sides in bfloat16 instead:
lt.train_step(amp="bfloat16") against PyTorch's bfloat16 autocast (no GradScaler in any mode).
--dtype float32 (CUDA): VGG16-BN at 32 x 32 with batch 128 and ResNet-50 at 224 x 224 with batch 64,
without AMP on either side, each with its default math (TF32 convolutions, full float32 matmuls:
lt.config and torch.backends, printed with the table).

LAZYTENSOR_BENCH_QUICK=1 (or --quick) runs each configuration for a few steps: a smoke test.
LAZYTENSOR_BENCH_ONLY=ResNet-50 runs only the configurations whose label contains that text.
LARS and LAMB rows (the configuration's label ends ", LARS" or ", LAMB"): the same step under
lt.optim.LARS (momentum 0.9, weight decay 5e-4, trust coefficient 0.001) or lt.optim.LAMB (lr 1e-3,
weight decay 0.01), against PyTorch peers running the same rules written in torch ops
(lazytensor.bench.torch_layerwise), eager and, on CUDA, whole-step CUDA graph; for the first
configuration only. LAZYTENSOR_BENCH_OPTIMIZERS=SGD,LARS,LAMB (the default) chooses them.
LAZYTENSOR_BENCH_REGIONS=0 updates lazytensor's parameters one by one instead of over regions
(lazytensor.nn.regions); the row's note gives the steps per call and which.
"""
from __future__ import annotations

import gc
import os
import sys
import traceback
from dataclasses import dataclass

import numpy as np

CUDA_CONFIGS = (("VGG16-BN", "vgg16bn", 32, 512), ("VGG16-BN", "vgg16bn", 224, 64),
                ("ResNet-50", "resnet50", 224, 128))
CPU_CONFIGS = (("small VGG", "small_vgg", 32, 8), ("ResNet-18", "resnet18", 32, 16))
LR, MOMENTUM, WEIGHT_DECAY = 0.05, 0.9, 5e-4
LAZYTENSOR = "lazytensor lt.train_step"
FLOAT32_CONFIGS = (("VGG16-BN", "vgg16bn", 32, 128), ("ResNet-50", "resnet50", 224, 64))
AMP_DTYPES = ("float16", "bfloat16")      # --dtype: float16 (the default on CUDA) or bfloat16 autocast
DTYPES = AMP_DTYPES + ("float32",)        # float32: no AMP
OPTIMIZERS = ("SGD", "LARS", "LAMB")
LAYERWISE = {"LARS": dict(lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY, trust_coefficient=0.001),
             "LAMB": dict(lr=1e-3, weight_decay=0.01)}


@dataclass
class Row:
    config: str
    implementation: str
    images_per_s: float | None       # None: did not run (the note says why)
    peak_bytes: int | None
    note: str = ""


def quick() -> bool:
    return os.environ.get("LAZYTENSOR_BENCH_QUICK", "") not in ("", "0")


def _seconds_per_step(device: str):
    """A timer of one step: CUDA events over bursts on the GPU, host time on the CPU."""
    if device == "cpu":
        from lazytensor.kernels.timing import cpu_time
        return lambda fn: cpu_time(fn, repeat=2 if quick() else 15)
    from lazytensor.kernels.timing import burst_ms
    if quick():
        return lambda fn: burst_ms(fn, bursts=1, burst=2, warmup=1) * 1e-3
    return lambda fn: burst_ms(fn, bursts=5, burst=10, warmup=5) * 1e-3


def _torch(device: str):
    try:
        import torch
    except ImportError:
        return None
    if device == "cuda" and not torch.cuda.is_available():
        return None
    return torch


def _num_classes(px: int) -> int:
    return 10 if px == 32 else 1000


def _amp(device: str, dtype) -> str | None:
    """The AMP dtype of a run: None (float32: the CPU's, or --dtype float32), "float16" or "bfloat16"."""
    if device != "cuda" or dtype == "float32":
        return None
    return dtype or "float16"


def _optimizers() -> tuple:
    names = tuple(n.strip() for n in os.environ.get("LAZYTENSOR_BENCH_OPTIMIZERS", ",".join(OPTIMIZERS)).split(",")
                  if n.strip())
    unknown = [n for n in names if n not in OPTIMIZERS]
    if unknown:
        raise ValueError(f"LAZYTENSOR_BENCH_OPTIMIZERS: {', '.join(unknown)}; the train suite runs {', '.join(OPTIMIZERS)}")
    return names


def lazytensor_row(config, name, px, batch, device, timer, amp=None, optimizer="SGD") -> Row:
    from lazytensor.kernels.backend import backend_for
    from lazytensor.nn import optim
    from lazytensor.nn.train_step import train_step
    from lazytensor.ops.softmax import cross_entropy
    from lazytensor.tools.peak_memory import PeakMemory
    from lazytensor.train.data import SyntheticBatches
    from lazytensor.train.models import build_model

    from lazytensor.core.dtypes import BFLOAT16
    amp = _amp(device, amp)
    dtype = {None: np.float32, "float16": np.float16, "bfloat16": BFLOAT16}[amp]
    with PeakMemory(device) as peak:
        model = build_model(name, px, _num_classes(px), dtype=dtype, device=device)
        x, labels = SyntheticBatches(batch, px, _num_classes(px), device, count=1).batches[0]
        regions = os.environ.get("LAZYTENSOR_BENCH_REGIONS", "1") != "0"
        if optimizer == "SGD":
            optimizer = optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY,
                                  regions=regions)
        else:
            # (None: over regions where the backend has segmented sums, else each parameter on its own)
            optimizer = getattr(optim, optimizer)(model.parameters(), regions=None if regions else False,
                                                  **LAYERWISE[optimizer])
        step = train_step(model, cross_entropy, optimizer, amp={None: False, "float16": True}.get(amp, amp))
        seconds = timer(lambda: step(x, labels))
        backend_for(device).synchronize()
    label = "" if amp is None else " (AMP)" if amp == "float16" else f" (AMP {amp})"
    where = (f"parameters in {len(optimizer.units)} regions" if optimizer.regions else "per-parameter updates")
    return Row(config, LAZYTENSOR + label, batch / seconds, peak.bytes if device == "cuda" else None,
               f"{len(step.last.plan.steps)} steps per call, {where}")


def torch_rows(torch, config, name, px, batch, device, timer, amp=None, optimizer="SGD") -> list:
    """PyTorch eager, whole-step CUDA graph and torch.compile (CUDA; LARS and LAMB: eager and CUDA
    graph); on the CPU eager, with torch's default threads and with one."""
    modes = ("eager", "CUDA graph", "torch.compile") if device == "cuda" else ("eager", "eager, 1 thread")
    if optimizer != "SGD":
        modes = modes[:2]
    amp = _amp(device, amp)
    label = ("float32 " if device == "cuda" else "") if amp is None else "AMP " if amp == "float16" else f"AMP {amp} "
    rows = []
    for mode in modes:
        threads = torch.get_num_threads()
        try:
            if mode.endswith("1 thread"):
                torch.set_num_threads(1)
            seconds, peak = _torch_mode(torch, mode.split(",")[0], name, px, batch, device, timer, amp, optimizer)
            rows.append(Row(config, f"PyTorch {label}{mode}", batch / seconds, peak))
        except Exception as exc:     # a peer that fails is reported, not fatal to the run
            rows.append(Row(config, f"PyTorch {mode}", None, None, f"failed: {type(exc).__name__}: {exc}"[:200]))
        finally:
            torch.set_num_threads(threads)
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def _torch_mode(torch, mode, name, px, batch, device, timer, amp="float16", optimizer="SGD"):
    from lazytensor.bench.torch_models import build
    F = torch.nn.functional
    cuda = device == "cuda"
    autocast = None if amp is None else torch.bfloat16 if amp == "bfloat16" else torch.float16   # None: float32
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        torch.backends.cudnn.benchmark = not quick()
    torch.manual_seed(0)
    model = build(torch, name, px, _num_classes(px)).to(device).to(memory_format=torch.channels_last)
    if optimizer == "SGD":
        optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    else:
        from lazytensor.bench.torch_layerwise import layerwise_optimizer
        optimizer = layerwise_optimizer(torch, optimizer, model.parameters(), **LAYERWISE[optimizer])
    x = torch.randn(batch, 3, px, px, device=device).contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, _num_classes(px), (batch,), device=device)

    if mode == "CUDA graph":
        step = _captured_step(torch, model, optimizer, x, labels, autocast)
    else:
        forward = torch.compile(model) if mode == "torch.compile" else model
        # bfloat16 autocast needs no loss scaling (float32's range), as PyTorch's recipes say
        scaler = torch.amp.GradScaler("cuda", enabled=cuda and autocast is torch.float16)
        enabled = cuda and autocast is not None

        def step():
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device, dtype=autocast or torch.float16, enabled=enabled):
                loss = F.cross_entropy(forward(x), labels)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    seconds = timer(step)
    if cuda:
        torch.cuda.synchronize()
        return seconds, torch.cuda.max_memory_allocated()
    return seconds, None


def _captured_step(torch, model, optimizer, x, labels, autocast, warmup=3):
    """PyTorch's whole-network capture: warm up on a side stream, capture one step, replay it
    (DistributedDataParallel builds its buckets over its first iterations: more warm-up)."""
    F = torch.nn.functional
    static_x, static_labels = x.clone(), labels.clone()

    def body():
        with torch.autocast("cuda", dtype=autocast or torch.float16, cache_enabled=False, enabled=autocast is not None):
            loss = F.cross_entropy(model(static_x), static_labels)
        loss.backward()
        optimizer.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            optimizer.zero_grad(set_to_none=True)
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        body()

    def step():
        static_x.copy_(x)
        static_labels.copy_(labels)
        graph.replay()
    return step


def run_train_bench(print_fn=print, device: str = "cpu", dtype: str | None = None) -> list:
    """Runs every configuration of the device, prints the table, returns its rows. dtype: on CUDA,
    "float16" (AMP, the default) or "bfloat16" autocast for both lazytensor and PyTorch, or "float32"
    (no AMP)."""
    if dtype is not None and dtype not in DTYPES:
        raise ValueError(f"the train suite runs {', '.join(DTYPES)}; got {dtype!r}")
    amp = dtype
    timer = _seconds_per_step(device)
    # lazytensor's CPU backend sets OMP_WAIT_POLICY=PASSIVE, which OpenMP reads once, when loaded:
    # imported before torch, torch's OpenMP and numba's read it alike. Imported after, torch's pool
    # spins and numba's parallel launches wait for descheduled spinners (measured on 2 busy cores:
    # the small VGG's step 8.7 ms of CPU against 5.1, ResNet-18's 175 against 72)
    import lazytensor.kernels.cpu.backend  # noqa: F401
    torch = _torch(device)
    rows = []
    configs = CPU_CONFIGS if device != "cuda" else FLOAT32_CONFIGS if dtype == "float32" else CUDA_CONFIGS
    only = os.environ.get("LAZYTENSOR_BENCH_ONLY", "")
    optimizers = _optimizers()
    runs = [(c, opt) for c in configs for opt in optimizers
            if opt == "SGD" or c is configs[0]]     # LARS, LAMB on the first configuration
    for (config, name, px, batch), opt in runs:
        label = f"{config} {px}x{px}, batch {batch}" + ("" if opt == "SGD" else f", {opt}")
        if only not in label:
            continue
        try:
            rows.append(lazytensor_row(label, name, px, batch, device, timer, amp, opt))
        except Exception as exc:     # reported in the table (traceback on stderr); the peers still run
            traceback.print_exc()
            rows.append(Row(label, LAZYTENSOR, None, None, f"failed: {type(exc).__name__}: {exc}"[:300]))
        _progress(rows[-1])
        _free_device_memory(device)
        if torch is not None:
            for row in torch_rows(torch, label, name, px, batch, device, timer, amp, opt):
                rows.append(row)
                _progress(row)
    print_fn(render(rows, device, torch, _amp(device, amp)))
    return rows


def _progress(row: Row) -> None:
    """Each row on stderr as soon as it is measured: a run cut off by a time limit keeps its figures
    (the table comes at the end)."""
    speed = "-" if row.images_per_s is None else f"{row.images_per_s:,.0f} img/s"
    peak = "" if row.peak_bytes is None else f", peak {row.peak_bytes / 2**30:.2f} GiB"
    print(f"# measured: {row.config}, {row.implementation}: {speed}{peak} {row.note}".rstrip(), file=sys.stderr,
          flush=True)


def _free_device_memory(device):
    gc.collect()
    if device == "cuda":
        import cupy
        from lazytensor.reuse.replay import release_all
        release_all()
        cupy.get_default_memory_pool().free_all_blocks()


def render(rows: list, device: str, torch, amp: str | None = "float16") -> str:
    from lazytensor.tools.peak_memory import format_bytes
    out = [f"lazytensor training-step benchmark on {device}" + (" (quick: a few steps, not a measurement)"
                                                                  if quick() else ""), "",
           "| configuration | implementation | img/s | lazytensor's speed-up | peak memory |",
           "|---|---|---:|---:|---:|"]
    ours = {r.config: r.images_per_s for r in rows if r.implementation.startswith(LAZYTENSOR)}
    for r in rows:
        rate = "-" if r.images_per_s is None else f"{r.images_per_s:,.0f}"
        mine = ours.get(r.config)
        ratio = ("-" if r.implementation.startswith(LAZYTENSOR) or r.images_per_s is None or mine is None
                 else f"{mine / r.images_per_s:.2f}x")
        peak = "-" if r.peak_bytes is None else format_bytes(r.peak_bytes)
        out.append(f"| {r.config} | {r.implementation} | {rate} | {ratio} | {peak} |")
    notes = [f"{r.config}, {r.implementation}: {r.note}" for r in rows if r.note]
    if torch is None:
        notes.append("PyTorch peers: torch does not import here" + (" or sees no GPU" if device == "cuda" else ""))
    if device == "cuda":
        notes.append("peak memory: lazytensor's CuPy pool high-water mark (used bytes); "
                     "PyTorch's torch.cuda.max_memory_allocated")
        if amp is None:
            import lazytensor as lt
            notes.append(f"float32, no AMP: lt.config.conv_allow_tf32={lt.config.conv_allow_tf32}, matmul_allow_tf32="
                         f"{lt.config.matmul_allow_tf32}" + ("" if torch is None else
                         f"; torch.backends.cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
                         f"torch.backends.cuda.matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}"))
        elif amp == "bfloat16":
            notes.append("bfloat16 autocast in every PyTorch mode, no GradScaler; lazytensor amp='bfloat16'")
        else:
            notes.append("PyTorch CUDA graph mode: float16 autocast without GradScaler (not capturable)")
        notes.append("PyTorch: torch.backends.cudnn.benchmark = " + ("False (quick)" if quick() else "True in every mode"))
    else:
        notes.append("CPU: float32, no AMP; img/s from the least process CPU time (all threads) of a step over "
                     f"{2 if quick() else 15}; peak memory is not measured per implementation on the CPU")
    return "\n".join(out + [""] + notes)
