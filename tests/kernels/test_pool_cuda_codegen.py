"""The pooling kernels' CUDA C (kernels/cuda/pool.py) compiled to PTX with NVRTC, without a GPU: every
direction, kind and dtype, so that a codegen error fails CI."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")

from lazytensor.kernels.cuda.nvrtc_check import compile_to_ptx  # noqa: E402
from lazytensor.kernels.cuda.pool import KERNELS, render_pool  # noqa: E402

CASES = [(kernel, kind) for kernel in KERNELS for kind in ("max", "avg")
         if kind == "max" or kernel not in ("argmax", "backward_indexed")]


@pytest.mark.parametrize("kernel,kind", CASES)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("wide,vectors", [(False, False), (True, False), (False, True)])
def test_pool_kernel_compiles_to_ptx(kernel, kind, dtype, wide, vectors):
    vec = 16 // np.dtype(dtype).itemsize if vectors else 1
    source = render_pool(kernel, kind, dtype, wide=wide, vec=vec)
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
    from lazytensor.kernels.cuda.pool import windows_apart, windows_cover
    assert windows_apart(kernel, stride)
    assert windows_cover(in_shape, out_shape, kernel, stride, padding) == cover


def test_backward_kernels():
    from lazytensor.kernels.cuda.pool import backward_kernels
    shape = (1, 8, 8, 1)
    assert backward_kernels("max", shape, (1, 4, 4, 1), (2, 2), (2, 2), (0, 0)) == ("backward_windows",)
    assert backward_kernels("avg", shape, (1, 4, 4, 1), (3, 3), (2, 2), (1, 1)) == ("backward",)
    assert backward_kernels("max", shape, (1, 4, 4, 1), (3, 3), (2, 2), (1, 1)) == ("argmax", "backward_indexed")
    assert backward_kernels("max", (1, 40, 40, 1), (1, 2, 2, 1), (16, 16), (15, 15), (0, 0)) == ("backward",)
    with pytest.raises(ValueError, match="no avg pooling kernel 'argmax'"):
        render_pool("argmax", "avg", "float32")


def test_vector_width():
    from lazytensor.kernels.cuda.pool import vector_width
    assert vector_width(np.float16, 64) == 8 and vector_width(np.float32, 64) == 4
    assert vector_width(np.float64, 64) == 2 and vector_width(np.float16, 12) == 4
    assert vector_width(np.float16, 3) == 1 and vector_width(np.float32, 6) == 2
