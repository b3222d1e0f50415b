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
                                           "train", "dask", "all"],
                       default="all")
    bench.add_argument("--quick", action="store_true",
                       help="a few steps per configuration: a smoke test, not a measurement (suite train; "
                            "also LAZYTENSOR_BENCH_QUICK=1)")
    from lazytensor.train.command import add_train_command, check_train_arguments
    train = add_train_command(sub)
    args = parser.parse_args(argv)
    if args.command == "train":
        check_train_arguments(train, args)
    if args.command == "bench" and args.quick:
        os.environ["LAZYTENSOR_BENCH_QUICK"] = "1"
    # The demo and the benchmarks time compiled kernels from their first call, so calls wait for
    # numba rather than running through the interpreter tier while it compiles.
    os.environ.setdefault("LAZYTENSOR_JIT_WAIT", "1")
    if args.command == "demo":
        from lazytensor.tools.demo import run_demo
        run_demo(args.device)
    elif args.command == "train":
        from lazytensor.train.command import run_train
        run_train(args)
    else:
        from lazytensor.bench.suites import run_suites
        run_suites(args.device, args.suite, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
