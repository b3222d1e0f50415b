"""`python -m lazytensor bench --device cuda --suite epilogue`: cuBLASLt's epilogues against the GEMM and
the kernel after it (lazytensor.plan.heavy.matmul_epilogue).

1. The whole MLP training step of the autodiff bench (lt.train_step, one CUDA graph) with the
   epilogues off (GEMMs, relu kernels, bias-gradient reductions), on wherever cuBLASLt takes them
   (RELU_BIAS forward, BGRAD in the weight-gradient GEMMs) and measured per shape (the default).
2. A Linear layer's forward, relu(x @ w.T + b), as the MLP step runs it (batch 8192, 784 -> 4096 and
   4096 -> 4096, float32 and float16):

- the cuBLAS GEMM alone (what the forward costs at least when the ReLU is free);
- the GEMM and lazytensor's fused bias + ReLU kernel after it (one round trip of the product);
- cuBLASLt's GEMM with the RELU_BIAS epilogue (kernels/cuda/cublaslt_gemm.py: the activation written once);
- lazytensor's plan, which measures the two and takes the faster (lt.explain says which);
- PyTorch eager, relu(F.linear(x, w, b)), as the peer.
"""
from __future__ import annotations

import numpy as np

import lazytensor as lt
from lazytensor.bench.table import Table


def _rows(table, timer, torch, batch, k, n, dtype):
    import cupy as cp
    from lazytensor.kernels.cuda.cublas_gemm import arguments_for, run_gemm
    from lazytensor.kernels.cuda.cublaslt_gemm import run_epilogue_gemm
    from lazytensor.assign.plans import set_matmul_epilogue_mode
    from lazytensor.plan.heavy import matmul_epilogue
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
        set_matmul_epilogue_mode(mode)
        z = lt.empty((batch, n), dtype, "cuda")

        def run():
            z[...] = lt.relu(x @ w.T + b)
        table.add(case, name, timer(run))
        if mode == "measure":
            table.notes.append(f"{case}: " + next(line for line in str(lt.explain(lt.relu(x @ w.T + b), out=z, source=False))
                                                   .splitlines() if "Matmul" in line))
    set_matmul_epilogue_mode(matmul_epilogue.DEFAULT_MODE)
    table.add(case, "cuBLASLt RELU_BIAS epilogue, called directly",
              timer(lambda: run_epilogue_gemm(args, x.data, w.data.T, b.data, y.data)))
    if torch is not None:
        tx, tw, tb = (torch.from_dlpack(t.data) for t in (x, w, b))
        f = torch.nn.functional
        table.add(case, "PyTorch eager relu(F.linear(x, w, b))", timer(lambda: f.relu(f.linear(tx, tw, tb))))
    cp.cuda.Device().synchronize()


def _train_steps(table, timer, dtype):
    from lazytensor.bench.autodiff import _mlp_model, mlp_loss, mlp_optimizer
    from lazytensor.assign.plans import set_matmul_epilogue_mode
    from lazytensor.plan.heavy import matmul_epilogue
    case = f"MLP 784-4096-4096-10 lt.train_step, batch 8192, {np.dtype(dtype).name}"
    for mode, name in (("off", "epilogues off: GEMMs, relu kernels, bias-gradient reductions"),
                       ("on", "epilogues on: RELU_BIAS forward, BGRAD weight-gradient GEMMs"),
                       ("measure", "lazytensor's choice per shape (the default)")):
        set_matmul_epilogue_mode(mode)
        model, x, labels = _mlp_model("cuda", dtype)
        step = lt.train_step(model, mlp_loss, mlp_optimizer(model))
        table.add(case, name, timer(lambda: step(x, labels)))
        if mode == "measure":
            text = lt.explain(step, source=False)
            table.notes += [f"{case}: " + line[:330] for line in text.splitlines() if "Matmul" in line]
        step = model = None
    set_matmul_epilogue_mode(matmul_epilogue.DEFAULT_MODE)


def run_epilogue_bench(print_fn=print) -> Table:
    from lazytensor.bench.autodiff import _timer, _torch
    torch = _torch("cuda")
    table = Table("cuBLASLt epilogues on cuda: a training step and a Linear layer's forward, against the GEMM and the "
                  "kernel after it", "cuBLAS GEMM + lazytensor's fused bias+ReLU kernel")
    for dtype in (np.float32, np.float16):
        _train_steps(table, _timer("cuda"), dtype)
    for dtype in (np.float32, np.float16):
        for k, n in ((784, 4096), (4096, 4096)):
            _rows(table, _timer("cuda"), torch, 8192, k, n, dtype)
    print_fn(table.render())
    return table
