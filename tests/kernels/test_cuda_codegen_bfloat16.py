"""bfloat16's CUDA C compiled to PTX with NVRTC, without a GPU: every op on bfloat16 operands, every
cast to and from bfloat16, the reductions, scans and pooling kernels, so that a codegen error fails CI.
(Their values are checked on a GPU: tests/kernels/test_bfloat16_gpu.py.)"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")

import lazytensor as lt  # noqa: E402
from lazytensor.core.expr import apply  # noqa: E402
from lazytensor.kernels.cuda.accumulators import ACCUMULATORS  # noqa: E402
from lazytensor.kernels.cuda.layout import flat_geometry  # noqa: E402
from lazytensor.kernels.cuda.nvrtc_check import compile_to_ptx  # noqa: E402
from lazytensor.kernels.cuda.pool import KERNELS, render_pool  # noqa: E402
from lazytensor.kernels.cuda.prelude import prelude  # noqa: E402
from lazytensor.kernels.cuda.reduce_layout import plan_finish, plan_reduction  # noqa: E402
from lazytensor.kernels.cuda.render_cuda import render_cuda  # noqa: E402
from lazytensor.kernels.cuda.render_cuda_reduce import render_cuda_finish, render_cuda_reduce  # noqa: E402
from lazytensor.kernels.ops import ALL_DTYPES, BFLOAT16, OPS  # noqa: E402
from lazytensor.kernels.program import Reduction, program_for  # noqa: E402
from lazytensor.plan.lower import lower  # noqa: E402

BF = BFLOAT16


def _compile(sources, extra="") -> str:
    """One translation unit per prelude (float16 too or not) for many kernels."""
    ptx = []
    for float16 in (False, True):
        group = {s.name: s for s in sources if s.float16 == float16}
        if group:
            assert all(s.bfloat16 for s in group.values())
            unit = prelude(float16, True) + extra + "\n" + "\n".join(s.kernel for s in group.values())
            ptx.append(compile_to_ptx(unit, name=f"bf16_{len(group)}.cu", optimize=False))
    text = "\n".join(ptx)
    for s in sources:
        assert f".entry {s.name}(" in text, s.name
    return text


def _bf16(shape=(8,)):
    return lt.asarray(np.arange(1, 1 + int(np.prod(shape)), dtype=np.float32).reshape(shape).astype(BF))


def test_every_op_on_bfloat16_compiles():
    exprs = []
    for name, spec in OPS.items():
        if spec.arity == 3:
            candidates = [(lt.asarray(np.ones(8, bool)), _bf16(), _bf16()), (lt.asarray(np.ones(8, bool)), _bf16(), 2.5)]
        elif spec.arity == 2:
            candidates = [(_bf16(), _bf16()), (_bf16(), 3), (_bf16(), 0.5)]
        else:
            candidates = [(_bf16(),)]
        for operands in candidates:
            try:
                exprs.append(apply(name, *operands))
            except TypeError:
                pass            # no ml_dtypes loop (the bitwise ops): none here either
    bitwise = {"bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift"}
    assert {e.op for e in exprs} == set(OPS) - bitwise
    sources = []
    for expr in exprs:
        program, _, _ = lower(expr, expr.dtype)
        sources.append(render_cuda(program, flat_geometry(program, 1 << 20, [0] * (program.n_inputs + 1)).layout))
    _compile(sources)


def test_every_cast_to_and_from_bfloat16_compiles():
    sources = []
    for other in ALL_DTYPES:
        for src, dst in ((other, BF), (BF, other)):
            program = program_for((("load", src, 0), ("astype", dst, 0)), 1, (), dst)
            sources.append(render_cuda(program, flat_geometry(program, 4096, [0, 0]).layout))
    _compile(sources)


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min", "argmax", "var", "prod", "any"])
@pytest.mark.parametrize("axes,shape", [((0,), (4096,)), ((1,), (64, 96)), ((0,), (96, 64))])
def test_bfloat16_reductions_compile(kind, axes, shape):
    out = {"argmax": np.dtype(np.int64), "any": np.dtype(bool)}.get(kind, BF)
    acc = {"argmax": np.dtype(np.float32), "any": np.dtype(bool)}.get(kind, np.dtype(np.float32))
    spec = Reduction(kind, axes, shape, acc, out, 0, False)
    program = program_for((("load", BF, 0), ("exp", BF, 0)), 1, (), BF)
    itemsize = [2]
    strides = tuple(int(np.prod(shape[d + 1:])) * 2 for d in range(len(shape)))
    geometry = plan_reduction(shape, axes, [(shape, strides, 0)], itemsize, 132, 4)
    sources = [render_cuda_reduce(program, spec, geometry.layout)]
    for chunks in (64, 1024):
        sources.append(render_cuda_finish(spec, plan_finish(geometry.K, chunks)[0]))
    bf16 = [s for s in sources if s.bfloat16]
    _compile(bf16, ACCUMULATORS)
    for s in sources:
        if not s.bfloat16:           # a finish kernel whose output is not bfloat16
            compile_to_ptx(s.source, name=f"{s.name}.cu", optimize=False)


@pytest.mark.parametrize("kernel,kind", [(k, kind) for k in KERNELS for kind in ("max", "avg")
                                         if kind == "max" or k not in ("argmax", "backward_indexed")])
def test_bfloat16_pool_kernels_compile(kernel, kind):
    for vec in (1, 8):
        source = render_pool(kernel, kind, BF, vec=vec)
        assert source.bfloat16 and not source.float16
        ptx = compile_to_ptx(source.source, name=f"{source.name}.cu", optimize=False)
        assert f".entry {source.name}" in ptx
