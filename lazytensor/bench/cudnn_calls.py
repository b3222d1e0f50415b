"""Host cost and GPU time of one call of each cuDNN CBR graph, PyTorch's conv beside it when present.

    python -m lazytensor.bench.cudnn_calls [--calls 200]

Host cost: wall time of many back-to-back calls with no synchronisation inside the loop, divided by
the count, on a shape small enough that the GPU keeps up (so the host is what is measured).
GPU time: CUDA events around the same loop on the benchmark shapes, divided by the count.
Each graph's plan is chosen by timing (tables off), as a first call in a fresh process would.
"""

from __future__ import annotations

import argparse
import time

from lazytensor.cbr.conv_key import ConvKey
from lazytensor.cbr.cudnn_cache import ConvGraphCache
from lazytensor.cbr.cudnn_conv import conv2d, conv2d_genstats, conv2d_scale_bias_relu
from lazytensor.cbr.cudnn_handle import import_cuda_modules

SHAPES = [
    # (label, x NHWC, w KRSC, stride, padding)
    ("small 8x16x16x64 3x3", (8, 16, 16, 64), (64, 3, 3, 64), 1, 1),
    ("resnet 128x56x56 64->64 3x3", (128, 56, 56, 64), (64, 3, 3, 64), 1, 1),
    ("resnet 128x14x14 256->256 3x3", (128, 14, 14, 256), (256, 3, 3, 256), 1, 1),
    ("vgg 64x224x224 64->64 3x3", (64, 224, 224, 64), (64, 3, 3, 64), 1, 1),
]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m lazytensor.bench.cudnn_calls")
    p.add_argument("--calls", type=int, default=200)
    args = p.parse_args(argv)
    cupy, _ = import_cuda_modules()
    cache = ConvGraphCache(tune=True, table=None)
    torch = optional_torch()
    print(f"{'shape':32s} {'graph':22s} {'host us/call':>12s} {'GPU ms/call':>12s}  plan (source)")
    for label, x_shape, w_shape, stride, padding in SHAPES:
        rng = cupy.random.RandomState(0)
        x = rng.standard_normal(x_shape, dtype=cupy.float32).astype(cupy.float16)
        w = (rng.standard_normal(w_shape, dtype=cupy.float32) * 0.05).astype(cupy.float16)
        k = w_shape[0]
        scale = cupy.ones(k, dtype=cupy.float32)
        bias = cupy.zeros(k, dtype=cupy.float32)
        n, h, wd, _ = x_shape
        y = cupy.empty((n, h, wd, k), dtype=cupy.float16)  # stride 1, same padding in every shape above
        sums = cupy.empty(k, dtype=cupy.float32), cupy.empty(k, dtype=cupy.float32)
        calls = {
            "conv": lambda: conv2d(x, w, stride, padding, out=y, cache=cache),
            "conv_genstats": lambda: conv2d_genstats(x, w, stride, padding, out=y, sum_out=sums[0], sum_sq_out=sums[1], cache=cache),
            "conv_scale_bias_relu": lambda: conv2d_scale_bias_relu(x, w, scale, bias, stride, padding, out=y, cache=cache),
        }
        pointers = {
            "x": x.data.ptr, "w": w.data.ptr, "y": y.data.ptr, "sum": sums[0].data.ptr, "sum_sq": sums[1].data.ptr,
            "eq_scale": scale.data.ptr, "eq_bias": bias.data.ptr,
        }
        count = args.calls if n <= 16 else 20
        for name, call in calls.items():
            try:
                call()  # builds and chooses the plan
            except Exception as e:  # noqa: BLE001
                print(f"{label:32s} {name:22s} failed: {e}")
                continue
            host_us, gpu_ms = measure(cupy, call, count)
            entry = cache.entry(name, ConvKey.of(x_shape, w_shape, "float16", stride, padding), x.device.id)
            form = entry.graph.launch_form(entry.plan.index)
            plan = f"#{entry.plan.index} of {entry.plan.plan_count} ({entry.plan.source}, {form})"
            print(f"{label:32s} {name:22s} {host_us:12.1f} {gpu_ms:12.4f}  {plan}", flush=True)
            launch_us, _ = measure(cupy, lambda: entry.launch(pointers), count)
            print(f"{label:32s} {'  of which launch':22s} {launch_us:12.1f}", flush=True)
        if torch is not None:
            xt = torch.as_tensor(x, device="cuda").permute(0, 3, 1, 2)  # NCHW view of NHWC memory
            wt = torch.as_tensor(w, device="cuda").permute(0, 3, 1, 2)
            torch.backends.cudnn.benchmark = True
            call = lambda: torch.nn.functional.conv2d(xt, wt, stride=stride, padding=padding)  # noqa: E731
            for _ in range(3):
                call()
            host_us, gpu_ms = measure(cupy, call, args.calls if n <= 16 else 20, torch=torch)
            print(f"{label:32s} {'torch conv2d (peer)':22s} {host_us:12.1f} {gpu_ms:12.4f}  cudnn.benchmark", flush=True)
    return 0


def measure(cupy, call, count: int, torch=None):
    """(host microseconds per call, GPU milliseconds per call)."""
    sync = torch.cuda.synchronize if torch is not None else cupy.cuda.get_current_stream().synchronize
    sync()
    t0 = time.perf_counter()
    for _ in range(count):
        call()
    host_us = (time.perf_counter() - t0) / count * 1e6
    sync()
    if torch is not None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(count):
            call()
        end.record()
        end.synchronize()
        return host_us, start.elapsed_time(end) / count
    stream = cupy.cuda.get_current_stream()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    for _ in range(count):
        call()
    end.record(stream)
    end.synchronize()
    return host_us, cupy.cuda.get_elapsed_time(start, end) / count


def optional_torch():
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001
        return None


if __name__ == "__main__":
    raise SystemExit(main())
