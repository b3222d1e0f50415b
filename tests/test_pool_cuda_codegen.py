"""The pooling kernels' CUDA C (kernels/pool_cuda.py) compiled to PTX with NVRTC, without a GPU: every
direction, kind and dtype, so that a codegen error fails CI."""
from __future__ import annotations

import itertools

import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")

from lazytensor.kernels.nvrtc_check import compile_to_ptx  # noqa: E402
from lazytensor.kernels.pool_cuda import render_pool  # noqa: E402

CASES = list(itertools.product(["forward", "backward"], ["max", "avg"], ["float16", "float32", "float64"]))


@pytest.mark.parametrize("direction,kind,dtype", CASES)
def test_pool_kernel_compiles_to_ptx(direction, kind, dtype):
    source = render_pool(direction, kind, dtype)
    ptx = compile_to_ptx(source.source, name=f"{source.name}.cu", optimize=False)
    assert f".entry {source.name}" in ptx
    assert source.float16 == (dtype == "float16")
