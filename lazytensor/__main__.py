"""python -m lazytensor demo | bench [--device cpu|cuda] [--suite ...] [--quick] | train --model ... (see --help)"""
from __future__ import annotations

import argparse
import os
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lazytensor")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="build, explain, run and time a fused expression")
    demo.add_argument("--device", choices=["cpu", "cuda"], default=None)
    bench = sub.add_parser("bench", help="benchmark against NumPy/numexpr (cpu) or CuPy/torch (cuda)")
    bench.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    bench.add_argument("--suite", choices=["elementwise", "reduction", "cbr", "interactive", "several", "autodiff", "epilogue",
                                           "train", "dask", "linalg", "natural", "all"],
                       default="all")
    bench.add_argument("--quick", action="store_true",
                       help="a few steps per configuration: a smoke test, not a measurement (suite train; "
                            "also LAZYTENSOR_BENCH_QUICK=1)")
    bench.add_argument("--dtype", choices=["float16", "bfloat16", "float32"], default=None,
                       help="suite train on CUDA: float16 or bfloat16 (AMP in that dtype, both lazytensor and "
                            "PyTorch; default float16) or float32 (no AMP, each library's default TF32 settings)")
    bench.add_argument("--amp", choices=["float16", "bfloat16"], default=None,
                       help="the same as --dtype float16 / bfloat16")
    bench.add_argument("--nproc", type=int, default=None, metavar="N",
                       help="suite train: data parallel over N processes (one per GPU, under mpiexec) against "
                            "PyTorch DDP under torchrun")
    from lazytensor.train.command import add_train_command, check_train_arguments
    train = add_train_command(sub)
    args = parser.parse_args(argv)
    if args.command == "train":
        check_train_arguments(train, args)
    if args.command == "bench" and args.quick:
        os.environ["LAZYTENSOR_BENCH_QUICK"] = "1"
    # The demo and the benchmarks time compiled kernels from their first call, so calls wait for
    # numba rather than running through the interpreter tier while it compiles. Training runs as a
    # user's script does: the interpreter tier serves the first steps while the workers compile.
    if args.command != "train":
        os.environ.setdefault("LAZYTENSOR_JIT_WAIT", "1")
    if args.command == "demo":
        from lazytensor.tools.demo import run_demo
        run_demo(args.device)
    elif args.command == "train":
        from lazytensor.train.command import relaunch, run_train
        status = relaunch(args, sys.argv[1:] if argv is None else argv)
        if status is not None:
            return status
        run_train(args)
    else:
        from lazytensor.bench.suites import run_suites
        if args.amp and args.dtype and args.amp != args.dtype:
            parser.error(f"--amp {args.amp} and --dtype {args.dtype} disagree")
        if args.nproc and args.suite != "train":
            parser.error("--nproc goes with --suite train")
        run_suites(args.device, args.suite, print, args.dtype or args.amp, args.nproc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
