"""The arguments of lazytensor's cuBLAS GEMM (kernels/cuda/cublas_gemm.py), checked on the CPU: a NumPy
emulation of column-major cuBLAS (strided batched) GEMM, reading and writing the arrays' memory
exactly as cuBLAS would through those arguments, must give np.matmul's result for operands that are
row-major, transposed views, padded (a leading dimension beyond the row) or broadcast along batch
axes, and results that are row-major or transposed views. The GPU tests run the same on cuBLAS."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lazytensor.kernels.cuda.cublas_gemm import OP_N, arguments_for, gemm_arguments

SETTINGS = settings(max_examples=60, deadline=None)


def _matrix(rng, batch, rows, cols, layout, dtype=np.float64):
    """A (*batch, rows, cols) array: 'row' C-contiguous, 'col' a transposed view of a contiguous
    array, 'padded' rows of a wider array."""
    if layout == "row":
        return rng.standard_normal((*batch, rows, cols)).astype(dtype)
    if layout == "col":
        return np.swapaxes(rng.standard_normal((*batch, cols, rows)).astype(dtype), -1, -2)
    return rng.standard_normal((*batch, rows, cols + 3)).astype(dtype)[..., :cols]


def _col_major(x, rows, cols, ld, batch_stride, batch):
    """The column-major rows x cols matrices with leading dimension ld that cuBLAS reads at x's
    first element, one per batch entry."""
    s = x.itemsize
    return np.lib.stride_tricks.as_strided(x, (batch, rows, cols), (batch_stride * s, s, ld * s), writeable=True)


def emulate(args, a, b, out):
    x, y = (a, b) if args.first == "a" else (b, a)
    rows_x = (args.m, args.k) if args.transa == OP_N else (args.k, args.m)
    rows_y = (args.k, args.n) if args.transb == OP_N else (args.n, args.k)
    A = _col_major(x, *rows_x, args.lda, args.stride_a, args.batch)
    B = _col_major(y, *rows_y, args.ldb, args.stride_b, args.batch)
    A = A if args.transa == OP_N else np.swapaxes(A, -1, -2)
    B = B if args.transb == OP_N else np.swapaxes(B, -1, -2)
    C = _col_major(out, args.m, args.n, args.ldc, args.stride_c, args.batch)
    C[...] = A @ B


@SETTINGS
@given(m=st.integers(1, 5), n=st.integers(1, 5), k=st.integers(1, 5),
       batch=st.sampled_from([(), (1,), (3,), (2, 3)]),
       broadcast=st.sampled_from(["none", "a", "b"]),
       layouts=st.tuples(*[st.sampled_from(["row", "col", "padded"])] * 2),
       out_layout=st.sampled_from(["row", "col", "padded"]), seed=st.integers(0, 99))
def test_arguments_give_numpy_matmul(m, n, k, batch, broadcast, layouts, out_layout, seed):
    rng = np.random.default_rng(seed)
    a = _matrix(rng, () if broadcast == "a" else batch, m, k, layouts[0])
    b = _matrix(rng, () if broadcast == "b" else batch, k, n, layouts[1])
    out = _matrix(rng, batch, m, n, out_layout)
    out[...] = np.nan
    args, why = arguments_for(a, b, out)
    if len(batch) > 1 and (layouts[0] == "padded" and broadcast != "a" or layouts[1] == "padded" and broadcast != "b"
                           or out_layout == "padded"):
        pass                     # padded batches may not flatten to one stride: refusing is allowed
    elif args is None:
        pytest.fail(f"refused: {why}")
    if args is None:
        return
    emulate(args, a, b, out)
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-12, atol=1e-12)


def test_refusals_say_why():
    f32 = np.dtype(np.float32)
    assert arguments_for(np.ones(3), np.ones((3, 2)), np.ones(2))[1] == "a vector operand"
    x = np.ones((4, 4))[::2, ::2]
    assert "both strided" in arguments_for(x, x, np.ones((2, 2)))[1]
    assert "int64 operands" in arguments_for(np.ones((2, 2), int), np.ones((2, 2), int), np.ones((2, 2), int))[1]
    half = np.ones((2, 3, 4, 4), f32)[:, :1]                # broadcast along one batch axis of two
    assert "flatten" in gemm_arguments((2, 1, 4, 4), half.strides, (2, 3, 4, 4), np.ones((2, 3, 4, 4), f32).strides,
                                       (2, 3, 4, 4), np.ones((2, 3, 4, 4), f32).strides, 4)[1]
    assert arguments_for(np.ones((0, 3)), np.ones((3, 2)), np.ones((0, 2)))[1] == "an empty operand"


def test_explain_names_the_operands_passed_transposed():
    from lazytensor.plan.heavy.matmul import _layouts
    x, w = np.ones((6, 4), np.float32), np.ones((3, 4), np.float32)
    assert _layouts(arguments_for(x, w.T, np.ones((6, 3), np.float32))[0]) == "b: a transposed view (op flag, no copy)"
    assert _layouts(arguments_for(w.T.T, x.T, np.ones((6, 3), np.float32).T)[0]) == (
        "b: a transposed view (op flag, no copy), the result written transposed")
    assert _layouts(arguments_for(x.T, np.ones((3, 6), np.float32).T, np.ones((4, 3), np.float32))[0]) == (
        "a: a transposed view (op flag, no copy), b: a transposed view (op flag, no copy)")
