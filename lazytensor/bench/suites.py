"""`python -m lazytensor bench --device D --suite S`: which benchmark functions a suite runs."""
from __future__ import annotations

from lazytensor.cbr.progress import progress


def run_suites(device: str, suite: str, print_fn=print, dtype: str | None = None, nproc: int | None = None) -> None:
    wanted = ("elementwise", "reduction", "cbr") if suite == "all" else (suite,)
    for name in progress(wanted, f"bench on {device}", unit="suite"):
        if name == "interactive" and device == "cuda":     # the host's side of small calls on CUDA
            from lazytensor.bench.interactive import run_interactive_cuda_bench
            run_interactive_cuda_bench(print_fn)
        elif name == "interactive":
            from lazytensor.bench.interactive import run_interactive_bench
            run_interactive_bench(print_fn)
        elif name == "autodiff":
            from lazytensor.bench.autodiff import run_autodiff_bench
            run_autodiff_bench(print_fn, device)
        elif name == "train" and nproc:   # data parallel over nproc processes, against PyTorch DDP
            from lazytensor.bench.train_distributed import run_distributed_train_bench
            run_distributed_train_bench(print_fn, device, nproc)
        elif name == "train":             # whole training steps: one module for both devices
            from lazytensor.bench.train import run_train_bench
            run_train_bench(print_fn, device, dtype)
        elif name == "epilogue":          # a Linear layer's forward: GEMM + kernel or cuBLASLt's epilogue
            from lazytensor.bench.matmul_epilogue import run_epilogue_bench
            run_epilogue_bench(print_fn)
        elif name == "dask":              # Dask arrays of lazytensor chunks on a local cluster (CPU or CUDA)
            from lazytensor.bench.dask import run_dask_bench
            run_dask_bench(print_fn, device)
        elif name == "linalg":            # lt.linalg against CuPy's calls (CUDA)
            from lazytensor.bench.linalg import run_linalg_bench
            run_linalg_bench(print_fn)
        elif name == "natural":           # natural NumPy code: small reads and writes (CPU rows)
            from lazytensor.bench.natural import run_natural_bench
            run_natural_bench(print_fn, device)
        elif name == "several":           # several results at once: one module for both devices
            from lazytensor.bench.several import run_several_bench
            run_several_bench(print_fn, device)
        elif device == "cpu":
            if name == "elementwise":
                from lazytensor.bench.cpu import run_cpu_bench
                run_cpu_bench(print_fn)
            elif name == "reduction":
                from lazytensor.bench.cpu import run_cpu_reduction_bench
                run_cpu_reduction_bench(print_fn)
            else:
                from lazytensor.bench.cbr import run_cbr_bench
                run_cbr_bench(print_fn, "cpu")
        else:
            if name == "elementwise":
                from lazytensor.bench.cuda import run_cuda_bench
                run_cuda_bench(print_fn)
            elif name == "reduction":
                from lazytensor.bench.cuda_reduce import run_cuda_reduction_bench
                run_cuda_reduction_bench(print_fn)
            else:
                from lazytensor.bench.cbr import run_cbr_bench
                run_cbr_bench(print_fn, "cuda")
        print_fn("")
