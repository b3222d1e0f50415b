"""The pooling kernels' CUDA C (kernels/pool_cuda.py) compiled to PTX with NVRTC, without a GPU: every
direction, kind and dtype, so that a codegen error fails CI."""
from __future__ import annotations

import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")

from lazytensor.kernels.nvrtc_check import compile_to_ptx  # noqa: E402
from lazytensor.kernels.pool_cuda import KERNELS, render_pool  # noqa: E402

CASES = [(kernel, kind) for kernel in KERNELS for kind in ("max", "avg")
         if kind == "max" or kernel not in ("argmax", "backward_indexed")]


@pytest.mark.parametrize("kernel,kind", CASES)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("wide", [False, True])
def test_pool_kernel_compiles_to_ptx(kernel, kind, dtype, wide):
    source = render_pool(kernel, kind, dtype, wide=wide)
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


def test_backward_kernels():
    from lazytensor.kernels.pool_cuda import backward_kernels
    shape = (1, 8, 8, 1)
    assert backward_kernels("max", shape, (1, 4, 4, 1), (2, 2), (2, 2), (0, 0)) == ("backward_windows",)
    assert backward_kernels("avg", shape, (1, 4, 4, 1), (3, 3), (2, 2), (1, 1)) == ("backward",)
    assert backward_kernels("max", shape, (1, 4, 4, 1), (3, 3), (2, 2), (1, 1)) == ("argmax", "backward_indexed")
    assert backward_kernels("max", (1, 40, 40, 1), (1, 2, 2, 1), (16, 16), (15, 15), (0, 0)) == ("backward",)
    with pytest.raises(ValueError, match="no avg pooling kernel 'argmax'"):
        render_pool("argmax", "avg", "float32")


@pytest.mark.parametrize("direction,kind", [("forward", "max"), ("forward", "avg"), ("argmax", "max"),
                                            ("backward_windows", "max"), ("backward_windows", "avg")])
@pytest.mark.parametrize("wide", [False, True])
def test_the_vectorized_kernels_compile_to_ptx(direction, kind, wide):
    from lazytensor.kernels.pool_cuda_vector import render_vector_pool
    source = render_vector_pool(direction, kind, wide)
    ptx = compile_to_ptx(source.source, name=f"{source.name}.cu", optimize=False)
    assert f".entry {source.name}" in ptx and source.float16


@pytest.mark.parametrize("shape,kernel,stride,padding", [((2, 6, 4, 16), (2, 2), (2, 2), (0, 0)),
                                                        ((1, 7, 5, 8), (2, 2), (3, 2), (1, 0)),
                                                        ((1, 7, 6, 16), (3, 3), (2, 2), (1, 1))])
def test_the_vectorized_kernels_index_arithmetic(shape, kernel, stride, padding):
    # one thread per 8 channels of a window: the thread and lane arithmetic of pool_cuda_vector, line
    # for line in NumPy, against the loop oracles (forward; backward where windows do not overlap)
    import numpy as np
    from lazytensor.kernels.pool_cuda import windows_apart
    from newops_oracles import out_size, pool_backward_reference, pool_reference
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    flat = x.reshape(-1)
    flat[rng.random(flat.size) < 0.25] = 0.5
    flat[rng.random(flat.size) < 0.2] = -np.inf
    flat[rng.random(flat.size) < 0.05] = np.nan
    N, H, W, C = shape
    (KH, KW), (SH, SW), (PH, PW) = kernel, stride, padding
    P, Q = out_size(shape, kernel, stride, padding)
    g = rng.standard_normal((N, P, Q, C))
    xf, gf = x.reshape(-1), g.reshape(-1)
    y, dx = np.zeros(N * P * Q * C), np.zeros(x.size)
    G = C >> 3
    for i in range(N * P * Q * G):                           # _WINDOW's thread
        c = (i % G) << 3
        t = i // G
        q, t = t % Q, t // Q
        p, n = t % P, t // P
        h0, w0 = p * SH - PH, q * SW - PW
        o = ((n * P + p) * Q + q) * C + c
        cells = [(r, s, ((n * H + h0 + r) * W + w0 + s) * C + c) for r in range(KH) for s in range(KW)
                 if 0 <= h0 + r < H and 0 <= w0 + s < W]
        first = (max(h0, 0) - h0) * KW + (max(w0, 0) - w0)
        for j in range(8):                                    # the lanes
            best, at = -np.inf, first
            for r, s, cell in cells:
                e = xf[cell + j]
                if e > best or np.isnan(e):
                    best, at = e, r * KW + s
            y[o + j] = best
            for r, s, cell in cells:                          # _BACKWARD_MAX_EACH
                dx[cell + j] = gf[o + j] if r * KW + s == at else 0.0
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(y.reshape(g.shape), pool_reference("max", x, kernel, stride, padding), rtol=1e-12)
    if windows_apart(kernel, stride):
        want = pool_backward_reference("max", x, g, kernel, stride, padding)
        np.testing.assert_allclose(dx.reshape(shape), want, rtol=1e-12)
