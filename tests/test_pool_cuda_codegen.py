"""The pooling kernels' CUDA C (kernels/pool_cuda.py) compiled to PTX with NVRTC, without a GPU: every
direction, kind and dtype, so that a codegen error fails CI."""
from __future__ import annotations

import itertools

import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")

from lazytensor.kernels.nvrtc_check import compile_to_ptx  # noqa: E402
from lazytensor.kernels.pool_cuda import render_pool  # noqa: E402

CASES = (list(itertools.product(["forward", "backward"], ["max", "avg"], ["float16", "float32", "float64"]))
         + [("backward_tiles", "max", dtype) for dtype in ("float16", "float32", "float64")])


@pytest.mark.parametrize("direction,kind,dtype", CASES)
def test_pool_kernel_compiles_to_ptx(direction, kind, dtype):
    source = render_pool(direction, kind, dtype)
    ptx = compile_to_ptx(source.source, name=f"{source.name}.cu", optimize=False)
    assert f".entry {source.name}" in ptx
    assert source.float16 == (dtype == "float16")


def test_max_pool_backward_takes_the_window_kernel_only_where_windows_tile_the_input():
    from lazytensor.kernels.pool_cuda import backward_direction
    assert backward_direction("max", (2, 8, 6, 4), (2, 4, 3, 4), (2, 2), (2, 2), (0, 0)) == "backward_tiles"
    assert backward_direction("max", (2, 9, 6, 4), (2, 4, 3, 4), (2, 2), (2, 2), (0, 0)) == "backward"  # row 8 left out
    assert backward_direction("max", (2, 8, 6, 4), (2, 4, 3, 4), (2, 2), (2, 2), (1, 0)) == "backward"
    assert backward_direction("max", (2, 8, 6, 4), (2, 4, 3, 4), (3, 2), (2, 2), (0, 0)) == "backward"  # overlapping
    assert backward_direction("avg", (2, 8, 6, 4), (2, 4, 3, 4), (2, 2), (2, 2), (0, 0)) == "backward"
