"""The pooling kernels' CUDA C (kernels/pool_cuda.py) compiled to PTX with NVRTC, without a GPU: every
direction, kind and dtype, so that a codegen error fails CI."""
from __future__ import annotations

import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")

from lazytensor.kernels.nvrtc_check import compile_to_ptx  # noqa: E402
from lazytensor.kernels.pool_cuda import render_pool  # noqa: E402

CASES = [("forward", False), ("backward", False), ("backward", True)]


@pytest.mark.parametrize("direction,windows", CASES)
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("wide", [False, True])
def test_pool_kernel_compiles_to_ptx(direction, windows, kind, dtype, wide):
    source = render_pool(direction, kind, dtype, windows=windows, wide=wide)
    ptx = compile_to_ptx(source.source, name=f"{source.name}.cu", optimize=False)
    assert f".entry {source.name}" in ptx
    assert source.float16 == (dtype == "float16")


@pytest.mark.parametrize("in_shape,out_shape,kernel,stride,padding,cover", [
    ((1, 4, 4, 1), (1, 2, 2, 1), (2, 2), (2, 2), (0, 0), True),       # VGG's 2x2/2 pools tile the input
    ((1, 5, 5, 1), (1, 2, 2, 1), (2, 2), (2, 2), (0, 0), False),      # the last row and column in no window
    ((1, 5, 5, 1), (1, 3, 3, 1), (2, 2), (2, 2), (1, 1), True),       # padding: the first window is cut
    ((1, 7, 7, 1), (1, 2, 2, 1), (2, 2), (3, 3), (0, 0), False),      # gaps between windows
    ((1, 3, 3, 1), (1, 3, 3, 1), (1, 1), (1, 1), (0, 0), True),
])
def test_windows_cover(in_shape, out_shape, kernel, stride, padding, cover):
    from lazytensor.kernels.pool_cuda import windows_apart, windows_cover
    assert windows_apart(kernel, stride)
    assert windows_cover(in_shape, out_shape, kernel, stride, padding) == cover
