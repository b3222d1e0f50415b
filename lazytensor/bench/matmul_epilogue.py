"""`python -m lazytensor bench --device cuda --suite epilogue`: a Linear layer's forward, relu(x @ w.T + b),
as the MLP step runs it (batch 8192, 784 -> 4096 and 4096 -> 4096, float32 and float16):

- the cuBLAS GEMM alone (what the forward costs at least when the ReLU is free);
- the GEMM and lazytensor's fused bias + ReLU kernel after it (one round trip of the product);
- cuBLASLt's GEMM with the RELU_BIAS epilogue (kernels/cublaslt_gemm.py: the activation written once);
- lazytensor's plan, which measures the two and takes the faster (lt.explain says which);
- PyTorch eager, relu(F.linear(x, w, b)), as the peer.
"""
from __future__ import annotations

import numpy as np

import lazytensor as lt
from lazytensor.bench.table import Table


def _rows(table, timer, torch, batch, k, n, dtype):
    import cupy as cp
    from lazytensor.kernels.cublas_gemm import arguments_for, run_gemm
    from lazytensor.kernels.cublaslt_gemm import run_epilogue_gemm
    from lazytensor.plan import matmul_epilogue
    rng = np.random.default_rng(0)
    x = lt.asarray(rng.standard_normal((batch, k)).astype(dtype), device="cuda")
    w = lt.asarray((rng.standard_normal((n, k)) / np.sqrt(k)).astype(dtype), device="cuda")
    b = lt.asarray(rng.standard_normal(n).astype(dtype), device="cuda")
    y = lt.empty((batch, n), dtype, "cuda")
    case = f"relu(x @ w.T + b), ({batch}, {k}) @ ({k}, {n}), {np.dtype(dtype).name}"
    args, _ = arguments_for(x.data, w.data.T, y.data)
    table.add(case, "cuBLAS GEMM alone (no bias, no ReLU)", timer(lambda: run_gemm(args, x.data, w.data.T, y.data)))
    for mode, name in (("off", "cuBLAS GEMM + lazytensor's fused bias+ReLU kernel"),
                       ("on", "cuBLASLt GEMM with the RELU_BIAS epilogue (through lazytensor's plan)"),
                       ("measure", "lazytensor's plan (measures both, takes the faster)")):
        matmul_epilogue.set_mode(mode)
        z = lt.empty((batch, n), dtype, "cuda")

        def run():
            z[...] = lt.relu(x @ w.T + b)
        table.add(case, name, timer(run))
        if mode == "measure":
            table.notes.append(f"{case}: " + next(line for line in str(lt.explain(lt.relu(x @ w.T + b), out=z, source=False))
                                                   .splitlines() if "Matmul" in line))
    matmul_epilogue.set_mode(matmul_epilogue.DEFAULT_MODE)
    table.add(case, "cuBLASLt RELU_BIAS epilogue, called directly",
              timer(lambda: run_epilogue_gemm(args, x.data, w.data.T, b.data, y.data)))
    if torch is not None:
        tx, tw, tb = (torch.from_dlpack(t.data) for t in (x, w, b))
        f = torch.nn.functional
        table.add(case, "PyTorch eager relu(F.linear(x, w, b))", timer(lambda: f.relu(f.linear(tx, tw, tb))))
    cp.cuda.Device().synchronize()


def run_epilogue_bench(print_fn=print) -> Table:
    from lazytensor.bench.autodiff import _timer, _torch
    torch = _torch("cuda")
    table = Table("a Linear layer's forward on cuda: GEMM + fused kernel against cuBLASLt's epilogue",
                  "cuBLAS GEMM + lazytensor's fused bias+ReLU kernel")
    for dtype in (np.float32, np.float16):
        for k, n in ((784, 4096), (4096, 4096)):
            _rows(table, _timer("cuda"), torch, 8192, k, n, dtype)
    print_fn(table.render())
    return table
