"""Measure the cuDNN plans of a model's conv shapes and write the experience table.

Design: docs/design/cbr.md, section "cbr/tune.py".
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

import numpy as np
from ml_dtypes import bfloat16 as BFLOAT16

from .conv_key import ConvKey
from .cudnn_cache import device_identity
from .cudnn_errors import CudnnGraphRejected
from .cudnn_dbn import dbn_key
from .cudnn_graphs import GRAPH_ROLES, GraphKind, build_conv_graph
from .cudnn_handle import bind_current_stream, handle_for_device, import_cuda_modules
from .progress import progress
from .cudnn_plans import describe_error, time_plans
from .experience_table import TABLES_DIR, ExperienceTable, make_entry, rejected_entry
from .model_shapes import MODELS, distinct_shapes

# Plans every graph gets before any graph gets more (the budget notwithstanding, the first always runs).
FIRST_PASS_PLANS = 3


class GraphTuning:
    """One graph of one shape being tuned: the plans timed so far and the next to try."""

    def __init__(self, kind: GraphKind, key: ConvKey, layers: list[str]):
        self.kind, self.key, self.layers = kind, key, layers
        self.graph = None
        self.pointers: dict[str, int] = {}
        self.rejected: str | None = None
        self.error: str | None = None
        self.timings: list = []
        self.failures: dict[str, str] = {}
        self.next_index = 0
        self.limit = 0
        self.cut_by_budget = False

    def start(self, handle, pointers: dict[str, int], max_plans: int) -> None:
        try:
            self.graph = build_conv_graph(self.kind, self.key, handle)
        except CudnnGraphRejected as e:
            self.rejected = e.reason
            return
        except Exception as e:  # noqa: BLE001 - recorded; the run goes on with the other graphs
            self.error = describe_error(e)
            return
        self.pointers = {r: pointers[r] for r in GRAPH_ROLES[self.kind]}
        count = self.graph.plan_count
        self.limit = count if max_plans <= 0 else min(count, max_plans)

    @property
    def pending(self) -> bool:
        return self.graph is not None and self.error is None and self.next_index < self.limit

    def time_more(self, plans: int, runs: int) -> None:
        stop = min(self.limit, self.next_index + plans)
        best = min((t.median_ms for t in self.timings), default=math.inf)
        try:
            timings, failures, _ = time_plans(self.graph, self.pointers, range(self.next_index, stop), runs, best_so_far_ms=best)
        except Exception as e:  # noqa: BLE001
            self.error = describe_error(e)
            return
        self.timings.extend(timings)
        self.failures.update(failures)
        self.next_index = stop

    def entry(self) -> dict:
        if self.rejected is not None:
            return rejected_entry(self.rejected)
        if self.error is not None and not self.timings:
            return {"error": self.error}
        entry = make_entry(self.graph.plan_count, self.timings, self.failures, truncated=self.cut_by_budget)
        if self.error is not None:
            entry["error"] = self.error
        return entry


def main(argv=None) -> int:
    args = parse_args(argv)
    cupy, cudnn = import_cuda_modules()
    make_convs, default_batch = MODELS[args.model]
    batch = args.batch or default_batch
    shapes = [(dataclasses.replace(key, tf32=args.tf32 and key.dtype == "float32"), layers)
              for key, layers in distinct_shapes(make_convs(batch, dtype=args.dtype))]
    kinds = [GraphKind(k) for k in args.kinds.split(",")]

    device_id = cupy.cuda.Device().id
    gpu_name, cudnn_version = device_identity(device_id)
    handle = handle_for_device(device_id)
    bind_current_stream(handle)
    table = ExperienceTable(
        gpu_name,
        cudnn_version,
        meta={
            "model": args.model,
            "batch": batch,
            "dtype": args.dtype + (" (TF32 engines allowed)" if args.tf32 and args.dtype == "float32" else ""),
            "cudnn_frontend": getattr(cudnn, "__version__", "?"),
            "max_plans": args.max_plans,
            "runs": args.runs,
            "measured": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "how": "CUDA events around back-to-back execute_plan_at_index calls; median of the runs",
        },
    )
    # float16 keeps the model's file; other dtypes (and TF32) get files of their own, merged on reading
    tf32 = "-tf32" if args.tf32 and args.dtype == "float32" else ""
    variant = "" if args.dtype == "float16" else f"-{args.dtype}{tf32}"
    out_path = Path(args.out) / table.file_name(args.model + variant)
    print(f"# {args.model}, batch {batch}: {len(shapes)} distinct conv shapes x {len(kinds)} graphs on {gpu_name}, "
          f"cuDNN {cudnn_version}, frontend {table.meta['cudnn_frontend']} -> {out_path}", flush=True)
    started = time.monotonic()
    deadline = started + args.budget_s if args.budget_s > 0 else math.inf

    def save() -> None:
        for job in jobs:
            table.record(job.kind, job.key, job.entry())
        table.meta["elapsed_s"] = round(time.monotonic() - started, 1)
        table.save(out_path)

    # Pass 1: every graph of every shape, its first plans. Buffers stay alive for pass 2.
    jobs: list[GraphTuning] = []
    buffers_by_shape = []
    dbn_done: set = set()
    for key, layers in progress(shapes, "tune: first plans", unit="shape"):
        buffers = allocate_buffers(cupy, key)
        buffers_by_shape.append(buffers)
        pointers = {role: a.data.ptr for role, a in buffers.items()}
        for kind in kinds:
            job_key, job_pointers = key, pointers
            if kind is GraphKind.DBN_RELU:      # keyed by the output shape alone: once per distinct output
                job_key = dbn_key(key.out_shape, key.dtype)
                if job_key in dbn_done:
                    continue
                dbn_done.add(job_key)
                dbn_buffers = allocate_buffers(cupy, job_key)
                buffers_by_shape.append(dbn_buffers)
                job_pointers = {role: a.data.ptr for role, a in dbn_buffers.items()}
            job = GraphTuning(kind, job_key, layers)
            job.start(handle, job_pointers, args.max_plans)
            if job.pending:
                job.time_more(FIRST_PASS_PLANS if time.monotonic() < deadline else 1, args.runs)
            if kind is GraphKind.CONV_GENSTATS and "genstats_outputs" not in table.meta and job.timings:
                best = min(job.timings, key=lambda t: t.median_ms)
                table.meta["genstats_outputs"] = probe_genstats_outputs(cupy, job.graph, buffers, best)
            jobs.append(job)
    save()

    # Pass 2: one more plan per graph per round, while the budget lasts.
    rounds = 0
    while any(job.pending for job in jobs) and time.monotonic() < deadline:
        rounds += 1
        for job in progress(jobs, f"tune: round {rounds}", unit="graph"):
            if job.pending and time.monotonic() < deadline:
                job.time_more(1, args.runs)
        save()
    for job in jobs:
        job.cut_by_budget = job.pending
    save()

    for job in jobs:
        print(graph_line(job.kind, job.key, table.lookup(job.kind, job.key)), flush=True)
    print_summary(jobs, table)
    print(f"# wrote {out_path} in {time.monotonic() - started:.1f} s", flush=True)
    return 0


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m lazytensor.cbr.tune", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, choices=sorted(MODELS))
    p.add_argument("--batch", type=int, default=0, help="batch size (default: 128 for resnet50, 64 for vgg16)")
    p.add_argument("--out", default=str(TABLES_DIR), help="directory for the JSON table (default: cbr/tables/)")
    p.add_argument("--max-plans", type=int, default=8, help="plans timed per graph, in heuristic order (0: all)")
    p.add_argument("--runs", type=int, default=3, help="timed runs per plan after one warm-up")
    p.add_argument("--budget-s", type=float, default=0.0, help="wall-clock bound for the whole run (0: none)")
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32", "float64"],
                   help="the activations' and weights' dtype (default float16)")
    p.add_argument("--tf32", action=argparse.BooleanOptionalAction, default=True,
                   help="float32: tune the graphs with TF32 engines allowed (lt.config.conv_allow_tf32's default), "
                        "or strict float32 (--no-tf32)")
    # The backward graphs (conv_dgrad, conv_wgrad, dbn_relu) are tuned when named; by default the forward ones.
    forward = (GraphKind.CONV_GENSTATS, GraphKind.CONV, GraphKind.CONV_SCALE_BIAS_RELU)
    p.add_argument("--kinds", default=",".join(k.value for k in forward), help="graphs to tune, comma-separated")
    return p.parse_args(argv)


def allocate_buffers(cupy, key: ConvKey) -> dict:
    """Random operands (timing on zeros would flatter some engines) and outputs for every role."""
    n, p, q, k = key.out_shape
    rng = cupy.random.RandomState(0)
    fan_in = key.c * key.r * key.s
    act = np.dtype(BFLOAT16) if key.dtype == "bfloat16" else np.dtype(key.dtype)

    def cast(values):       # CuPy casts to NumPy's dtypes only: bfloat16 is rounded on the host
        return cupy.asarray(cupy.asnumpy(values).astype(act)) if act == BFLOAT16 else values.astype(act)
    return {
        "x": cast(rng.standard_normal(key.x_shape, dtype=cupy.float32)),
        "w": cast(rng.standard_normal(key.w_shape, dtype=cupy.float32) / math.sqrt(fan_in)),
        "y": cupy.empty((n, p, q, k), dtype=act),
        "sum": cupy.zeros(k, dtype=cupy.float32),
        "sum_sq": cupy.zeros(k, dtype=cupy.float32),
        "eq_scale": rng.uniform(0.5, 1.5, (k,), dtype=cupy.float32),
        "eq_bias": rng.standard_normal((k,), dtype=cupy.float32),
        "dy": cast(rng.standard_normal((n, p, q, k), dtype=cupy.float32)),
        "dx": cupy.empty(key.x_shape, dtype=act),
        "dw": cupy.empty(key.w_shape, dtype=act),
        # the dBN graph (dbn_relu): the packed ReLU mask (random bits), the BN vectors and its outputs
        "mask": rng.randint(0, 256, ((n * p * q * k + 7) // 8,)).astype(cupy.uint8),
        "gamma": rng.uniform(0.5, 1.5, (k,), dtype=cupy.float32),
        "mean": rng.standard_normal((k,), dtype=cupy.float32),
        "inv_var": rng.uniform(0.5, 1.5, (k,), dtype=cupy.float32),
        "dgamma": cupy.empty(k, dtype=cupy.float32),
        "dbeta": cupy.empty(k, dtype=cupy.float32),
    }


def probe_genstats_outputs(cupy, cg, buffers, plan) -> str:
    """Whether genstats overwrites its sum buffers or adds to them (recorded for the runtime's sake)."""
    try:
        workspace = cupy.empty(max(plan.workspace_bytes, 1), dtype=cupy.uint8)
        operands = cg.operand_pointers({r: buffers[r].data.ptr for r in GRAPH_ROLES[GraphKind.CONV_GENSTATS]})
        sums = []
        for start in (0.0, 1.0e6):
            buffers["sum"].fill(start)
            buffers["sum_sq"].fill(start)
            cg.launch(plan.index, operands, workspace.data.ptr if plan.workspace_bytes else 0)
            sums.append(float(cupy.asnumpy(buffers["sum_sq"][:1])[0]))
        return "accumulated" if abs((sums[1] - sums[0]) - 1.0e6) < 1.0e3 else "overwritten"
    except Exception as e:  # noqa: BLE001
        return f"unknown ({describe_error(e)})"


def graph_line(kind: GraphKind, key: ConvKey, entry: dict) -> str:
    head = f"{kind.value:21s} {key.table_key():58s}"
    if "rejected" in entry:
        return f"{head} REJECTED: {entry['rejected'][:200]}"
    if "error" in entry:
        return f"{head} ERROR: {entry['error'][:200]}"
    times = sorted(entry.get("times_ms", {}).values())
    if not times:
        return f"{head} {entry['plan_count']:3d} plans, none ran: {list(entry.get('failed', {}).values())[:2]}"
    w = entry["winner"]
    more = " (cut by the budget)" if entry.get("truncated") else ""
    return (
        f"{head} {entry['plan_count']:3d} plans, timed {entry['timed']}{more}: best {times[0]:.4f} ms, "
        f"worst {times[-1]:.4f} ms, cuDNN's first {entry['heuristic_choice']['median_ms']:.4f} ms; "
        f"winner #{w['index']} ws {w['workspace_bytes']} B, failed {len(entry.get('failed', {}))}"
    )


def print_summary(jobs: list[GraphTuning], table: ExperienceTable) -> None:
    """conv+genstats against conv alone (and the inference graph) per shape: best times."""
    print("\n# best ms per shape: conv+genstats | conv | ratio | inference graph   (layers)")
    keys = list(dict.fromkeys((job.key, tuple(job.layers)) for job in jobs if job.kind is not GraphKind.DBN_RELU))
    fmt = lambda v: f"{v:8.4f}" if v is not None else "     n/a"  # noqa: E731
    for key, layers in keys:
        def best(kind):
            times = (table.lookup(kind, key) or {}).get("times_ms", {})
            return min(times.values()) if times else None

        g, c, i = best(GraphKind.CONV_GENSTATS), best(GraphKind.CONV), best(GraphKind.CONV_SCALE_BIAS_RELU)
        ratio = f"{g / c:5.2f}" if g and c else "  n/a"
        more = "..." if len(layers) > 3 else ""
        print(f"{key.table_key():58s} {fmt(g)} | {fmt(c)} | {ratio} | {fmt(i)}   ({', '.join(layers[:3])}{more})")
    backward = (GraphKind.CONV_DGRAD, GraphKind.CONV_WGRAD, GraphKind.DBN_RELU)
    if any(job.kind in backward for job in jobs):
        print("\n# best ms per shape, backward: conv_dgrad | conv_wgrad | dbn_relu (of the conv's output)")
        conv_keys = dict.fromkeys(job.key for job in jobs if job.kind is not GraphKind.DBN_RELU)
        for key in conv_keys:
            times = [(table.lookup(kind, dbn_key(key.out_shape) if kind is GraphKind.DBN_RELU else key) or {})
                     .get("times_ms", {}) for kind in backward]
            print(f"{key.table_key():58s} " + " | ".join(fmt(min(t.values()) if t else None) for t in times))


if __name__ == "__main__":
    sys.exit(main())
