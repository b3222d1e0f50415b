"""cuBLAS GEMM without allocation, so that a plan's matmul can be captured into a CUDA graph.

Design: docs/design/cuda-kernels.md, section "kernels/cuda/cublas_gemm.py".
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from lazytensor.kernels.config import config

OP_N, OP_T = 0, 1
class _ByDtypeName(dict):
    """A table keyed by NumPy dtype name, looked up by any dtype (ml_dtypes' bfloat16 is "bfloat16")."""

    def __getitem__(self, dtype):
        return super().__getitem__(np.dtype(dtype).name)

    def __contains__(self, dtype):
        try:
            return super().__contains__(np.dtype(dtype).name)
        except TypeError:       # not a dtype at all
            return False


_DATA_TYPE = _ByDtypeName(float16=2, float32=0, float64=1, bfloat16=14)     # cudaDataType (CUDA_R_16BF = 14)
_COMPUTE_32F, _COMPUTE_64F = 68, 70                 # cublasComputeType_t
_COMPUTE_32F_FAST_TF32 = 77                         # float32 data on TF32 tensor cores
_ALGO_DEFAULT = -1                                  # CUBLAS_GEMM_DEFAULT
WORKSPACE_BYTES = 32 << 20                          # cuBLAS's recommendation for Hopper
_INT_MAX = 2**31 - 1
# alpha = 1, beta = 0 in the compute type, read from host memory when a call is enqueued (and then
# baked into a captured graph): kept for good.
_ONE_ZERO = {np.dtype(np.float32): (np.ones(1, np.float32), np.zeros(1, np.float32)),
             np.dtype(np.float64): (np.ones(1, np.float64), np.zeros(1, np.float64))}


class GemmArguments(NamedTuple):
    """One cuBLAS (strided batched) GEMM: C' = op(A') op(B'), all column-major, where A' is the
    operand named by `first` ("a" or "b") and B' the other one. Leading dimensions and batch strides
    are in elements."""
    first: str
    transa: int
    transb: int
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    stride_a: int
    stride_b: int
    stride_c: int
    batch: int


def _element_strides(shape, strides, itemsize):
    if any(s % itemsize for s in strides):
        return None
    return tuple(s // itemsize for s in strides)


def _stored(rows, cols, s_rows, s_cols):
    """How a rows x cols matrix with these element strides is stored: ("row", ld) when each row is
    contiguous, ("col", ld) when each column is, else None."""
    if (s_cols == 1 or cols == 1) and s_rows >= 0:
        ld = s_rows if rows > 1 else cols
        if ld >= max(cols, 1):
            return "row", ld
    if (s_rows == 1 or rows == 1) and s_cols >= 0:
        ld = s_cols if cols > 1 else rows
        if ld >= max(rows, 1):
            return "col", ld
    return None


def _batch_stride(shape, strides, batch_shape):
    """One element stride that steps through the operand's batch axes in C order, 0 when it is
    broadcast along all of them, or None (it is broadcast along some only, or they do not flatten)."""
    shape = (1,) * (len(batch_shape) - len(shape)) + tuple(shape)
    strides = (0,) * (len(batch_shape) - len(strides)) + tuple(strides)
    if math.prod(shape) == 1:
        return 0
    if shape != tuple(batch_shape):
        return None
    stride, span = None, 1
    for size, s in zip(reversed(shape), reversed(strides)):
        if size == 1:
            continue
        if stride is None:
            stride = s
        elif s != stride * span:
            return None
        span *= size
    return stride


def gemm_arguments(a_shape, a_strides, b_shape, b_strides, out_shape, out_strides, itemsize):
    """-> (GemmArguments, None) for out = a @ b over arrays of these shapes and byte strides (one
    dtype of `itemsize`, out's shape the broadcast result), or (None, why cuBLAS cannot take it as
    it is)."""
    if len(a_shape) < 2 or len(b_shape) < 2:
        return None, "a vector operand"
    if 0 in a_shape or 0 in b_shape:
        return None, "an empty operand"
    strides = [_element_strides(s, st, itemsize) for s, st in ((a_shape, a_strides), (b_shape, b_strides),
                                                               (out_shape, out_strides))]
    if None in strides:
        return None, "a stride that is not a whole number of elements"
    sa, sb, so = strides
    if min(sa + sb + so) < 0:
        return None, "a negative stride"
    batch_shape = tuple(out_shape[:-2])
    batch = math.prod(batch_shape)
    stride_a = _batch_stride(a_shape[:-2], sa[:-2], batch_shape)
    stride_b = _batch_stride(b_shape[:-2], sb[:-2], batch_shape)
    stride_c = _batch_stride(out_shape[:-2], so[:-2], batch_shape)
    if stride_a is None or stride_b is None or stride_c is None or batch > 1 and stride_c == 0:
        return None, "batch axes that do not flatten to one stride"
    m, k = a_shape[-2:]
    n = b_shape[-1]
    out_layout = _stored(m, n, *so[-2:])
    a_layout = _stored(m, k, *sa[-2:])
    b_layout = _stored(k, n, *sb[-2:])
    if out_layout is None or a_layout is None or b_layout is None:
        return None, "an operand or result whose rows and columns are both strided"
    if out_layout[0] == "row":
        # cuBLAS's C' is C^T = B^T A^T: its A' is b, its B' is a; a row-major operand read
        # column-major is its own transpose (op N), a column-major one needs op T.
        first, plain, (x, sx), (y, sy), mm, nn = "b", "row", (b_layout, stride_b), (a_layout, stride_a), n, m
    else:
        # A transposed view of a row-major result is C itself column-major: C = A B.
        first, plain, (x, sx), (y, sy), mm, nn = "a", "col", (a_layout, stride_a), (b_layout, stride_b), m, n
    args = GemmArguments(first, OP_N if x[0] == plain else OP_T, OP_N if y[0] == plain else OP_T, mm, nn, k,
                         x[1], y[1], out_layout[1], sx, sy, stride_c, batch)
    if max(mm, nn, k, x[1], y[1], out_layout[1], batch) > _INT_MAX:
        return None, "a size beyond cuBLAS's 32-bit arguments"
    return args, None


class _Library:
    """libcublas through ctypes. CuPy's wrappers set the handle's stream on every call, and some
    CuPy versions refuse that during stream capture ("calling cuBLAS API during stream capture is
    currently unsupported"), so the few functions used here are called directly."""

    def __init__(self):
        import ctypes
        from cupy_backends.cuda.libs import cublas as _loaded   # noqa: F401  (loads libcublas)
        lib = load_library("cublas")
        p, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        self.create = checked(lib.cublasCreate_v2, [ctypes.POINTER(p)])
        self.set_stream = checked(lib.cublasSetStream_v2, [p, p])
        self.set_workspace = checked(lib.cublasSetWorkspace_v2, [p, p, ctypes.c_size_t])
        self.gemm = checked(lib.cublasGemmEx, [p, i, i, i, i, i, p, p, i, i, p, i, i, p, p, i, i, i, i])
        self.gemm_batched = checked(lib.cublasGemmStridedBatchedEx,
                                           [p, i, i, i, i, i, p, p, i, i, ll, p, i, i, ll, p, p, i, i, ll, i, i, i])
        self.ctypes = ctypes



_library = []
_handles: dict = {}     # device id -> (handle, the workspace set on it)


def _lib() -> _Library:
    if not _library:
        _library.append(_Library())
    return _library[0]


def _handle_for(lib, device_id: int):
    h = _handles.get(device_id)
    if h is None:
        import cupy
        with cupy.cuda.Device(device_id):
            handle = lib.ctypes.c_void_p()
            lib.create(lib.ctypes.byref(handle))
            h = _handles[device_id] = (handle.value, cupy.empty(WORKSPACE_BYTES, np.uint8))
    return h


def compute_type(dtype) -> int:
    """cuBLAS's compute type for `dtype` data: float64 in float64; float32 in full float32 unless
    lt.config.matmul_allow_tf32 (then TF32 tensor cores, as PyTorch's allow_tf32); float16 accumulates
    in float32. Read at each call (a captured graph keeps its own; a change of the switch drops them)."""
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return _COMPUTE_64F
    if dtype == np.float32 and config.matmul_allow_tf32:
        return _COMPUTE_32F_FAST_TF32
    return _COMPUTE_32F


def math_words(dtype) -> str:
    """What explain says of a matmul's math."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return ("float32 (TF32 tensor cores: lt.config.matmul_allow_tf32)" if config.matmul_allow_tf32
                else "float32 (strict: CUBLAS_COMPUTE_32F, lt.config.matmul_allow_tf32 = False)")
    if dtype == np.float64:
        return "float64"
    return f"{dtype.name} (float32 accumulation)"


def run_gemm(args: GemmArguments, a, b, out) -> None:
    """out[...] = a @ b on the current stream of out's device, as `args` (gemm_arguments) says."""
    import cupy
    lib = _lib()
    handle, workspace = _handle_for(lib, out.device.id)
    lib.set_stream(handle, cupy.cuda.get_current_stream().ptr)
    lib.set_workspace(handle, workspace.data.ptr, WORKSPACE_BYTES)    # setting the stream resets it
    dtype = out.dtype
    data_type = _DATA_TYPE[dtype]
    compute = compute_type(dtype)
    one, zero = _ONE_ZERO[np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)]
    x, y = (a, b) if args.first == "a" else (b, a)
    if args.batch == 1:
        lib.gemm(handle, args.transa, args.transb, args.m, args.n, args.k, one.ctypes.data,
                 x.data.ptr, data_type, args.lda, y.data.ptr, data_type, args.ldb, zero.ctypes.data,
                 out.data.ptr, data_type, args.ldc, compute, _ALGO_DEFAULT)
    else:
        lib.gemm_batched(handle, args.transa, args.transb, args.m, args.n, args.k, one.ctypes.data,
                         x.data.ptr, data_type, args.lda, args.stride_a, y.data.ptr, data_type, args.ldb,
                         args.stride_b, zero.ctypes.data, out.data.ptr, data_type, args.ldc, args.stride_c,
                         args.batch, compute, _ALGO_DEFAULT)


def arguments_for(a, b, out):
    """gemm_arguments for three arrays, or (None, why); only float16/32/64 and bfloat16 of one dtype."""
    if not (a.dtype == b.dtype == out.dtype) or out.dtype not in _DATA_TYPE:
        return None, f"{out.dtype} operands (cuBLAS GEMM is called here for float16, bfloat16, float32 and float64)"
    return gemm_arguments(a.shape, a.strides, b.shape, b.strides, out.shape, out.strides, out.dtype.itemsize)


def checked(f, argtypes):
    """A ctypes function of cuBLAS or cuBLASLt given its argument types, raising on a status other
    than success (0), with the function's name."""
    import ctypes
    f.argtypes = argtypes
    f.restype = ctypes.c_int
    name = f.__name__

    def call(*args):
        status = f(*args)
        if status != 0:
            raise RuntimeError(f"{name} failed with status {status}")
    return call


def load_library(name: str):
    """libcublas or libcublasLt (name "cublas" or "cublasLt") through ctypes, whichever CUDA major
    version is installed."""
    import ctypes
    for file in (f"lib{name}.so.12", f"lib{name}.so.13", f"lib{name}.so.11", f"lib{name}.so", f"{name}64_12.dll"):
        try:
            return ctypes.CDLL(file)
        except OSError:
            continue
    raise OSError(f"lib{name} could not be loaded (tried lib{name}.so.12/13/11)")
