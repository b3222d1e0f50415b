"""python -m lazytensor demo | bench [--device cpu|cuda] [--suite ...]"""
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
    bench.add_argument("--suite", choices=["elementwise", "reduction", "cbr", "interactive", "several", "autodiff", "all"],
                       default="all")
    args = parser.parse_args(argv)
    # The demo and the benchmarks time compiled kernels from their first call, so calls wait for
    # numba rather than running through the interpreter tier while it compiles.
    os.environ.setdefault("LAZYTENSOR_JIT_WAIT", "1")
    if args.command == "demo":
        from lazytensor.tools.demo import run_demo
        run_demo(args.device)
    else:
        from lazytensor.bench.suites import run_suites
        run_suites(args.device, args.suite, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
