"""CI checks, without a GPU, of the CUDA code the CBR path generates: the apply + ReLU + mask
kernel for every layout it meets, and the BN finalize kernels, compiled to PTX by NVRTC."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cuda.bindings")

from lazytensor.cbr.finalize_cuda import SOURCE as FINALIZE_SOURCE  # noqa: E402
from lazytensor.kernels.cuda.layout import plan_launch  # noqa: E402
from lazytensor.kernels.cuda.nvrtc_check import compile_to_ptx  # noqa: E402
from lazytensor.kernels.program import program_for, with_relu_mask  # noqa: E402
from lazytensor.kernels.cuda.render_cuda import render_cuda  # noqa: E402
from tests.support.layouts import contiguous_strides  # noqa: E402

F32 = np.dtype(np.float32)


def _apply_relu_mask(dtype):
    """relu((y * eq_scale + eq_bias).astype(dtype)) with the mask: what the CBR plan lowers to."""
    return with_relu_mask(program_for(
        (("load", dtype, 0), ("astype", F32, 0), ("load", F32, 1), ("multiply", F32, 1, 2),
         ("load", F32, 2), ("add", F32, 3, 4), ("astype", dtype, 5), ("relu", dtype, 6)), 3, (), dtype))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("shape", [(4, 7, 7, 64), (3, 5, 5, 24), (2, 3, 3, 3), (1, 1, 1, 5)])
def test_apply_relu_mask_kernel_compiles(dtype, shape):
    dtype = np.dtype(dtype)
    program = _apply_relu_mask(dtype)
    vec = ((shape[-1],), (4,), 0)
    geometry = plan_launch(program, shape, contiguous_strides(shape, dtype.itemsize), 0,
                           [(shape, contiguous_strides(shape, dtype.itemsize), 0), vec, vec])
    src = render_cuda(program, geometry.layout)
    assert "unsigned char* mask" in src.source and "mask[j]" in src.source
    compile_to_ptx(src.source, name=src.name)


def test_vector_mask_path_for_float16_channels_of_eight():
    shape = (2, 4, 4, 64)
    program = _apply_relu_mask(np.dtype(np.float16))
    vec = ((64,), (4,), 0)
    geometry = plan_launch(program, shape, contiguous_strides(shape, 2), 0, [(shape, contiguous_strides(shape, 2), 0), vec, vec])
    assert geometry.layout.vector == 8 and geometry.layout.rows    # the per-channel row loop
    src = render_cuda(program, geometry.layout)
    assert "lt_copy_vector<16>(in0_v" in src.source     # the group of 8 halves is one 16-byte load
    assert "lt_copy_vector<32>(raw, in1 + c0)" in src.source     # float32 scales read once per thread


def test_finalize_kernels_compile():
    compile_to_ptx(FINALIZE_SOURCE, name="bn_finalize")
