"""cuBLASLt GEMM with an epilogue: `relu(a @ b + bias)` (or `a @ b + bias`) written by the GEMM itself.

Design: docs/design/cuda-kernels.md, section "kernels/cuda/cublaslt_gemm.py".
"""
from __future__ import annotations

import numpy as np

from lazytensor.kernels import launch_log
from lazytensor.kernels.cuda.cublas_gemm import compute_type, _DATA_TYPE, _ONE_ZERO, WORKSPACE_BYTES, GemmArguments, _handle_for, _lib, checked, load_library

# cublasLtEpilogue_t: CUBLASLT_EPILOGUE_BIAS, _RELU_BIAS (the bias an input), _BGRADA, _BGRADB (the
# "bias" an output: the sum of cuBLAS's A' or B' over the k dimension, the bias gradient of a Linear
# layer computed by its weight-gradient GEMM)
EPILOGUES = {"bias": 4, "relu_bias": 6, "bgrada": 256, "bgradb": 512}
# cublasLtMatmulDescAttributes_t, cublasLtMatmulPreferenceAttributes_t
_DESC_TRANSA, _DESC_TRANSB, _DESC_EPILOGUE, _DESC_BIAS_POINTER = 3, 4, 7, 8
_PREF_MAX_WORKSPACE = 1
_PREF_ALIGNMENT = (5, 6, 7, 8)                  # MIN_ALIGNMENT_A/B/C/D_BYTES
_HEURISTIC_BYTES = 96                           # sizeof(cublasLtMatmulHeuristicResult_t): algo[64], size_t, int, float, int[4]


def epilogue_refusal(args: GemmArguments, bias_shape, bias_strides, bias_dtype, dtype) -> str | None:
    """Why cuBLASLt's bias epilogue cannot take this GEMM and bias as they are, or None."""
    if args.batch != 1:
        return "a batched product (the epilogue is planned for 2-D products)"
    if args.first != "b":
        return "a result written transposed (cuBLASLt's bias runs along the result's columns only then)"
    if np.dtype(bias_dtype) != np.dtype(dtype) or np.dtype(dtype) not in (np.float16, np.float32):
        return f"{np.dtype(dtype)} data with a {np.dtype(bias_dtype)} bias (the epilogue is used for float16 and float32)"
    if tuple(bias_shape) != (args.m,) or (args.m > 1 and bias_strides[0] != np.dtype(dtype).itemsize):
        return "a bias that is not one contiguous row of the result's width"
    return None


def bgrad_kind(args: GemmArguments) -> str:
    """The epilogue that sums the user's b operand (a @ b) over k: b is cuBLAS's A' when the result
    is row-major (C^T = B^T A^T), its B' when the result is written transposed."""
    return "bgrada" if args.first == "b" else "bgradb"


def bgrad_refusal(args: GemmArguments, sum_shape, sum_strides, sum_dtype, dtype) -> str | None:
    """Why cuBLASLt's bias-gradient epilogue cannot write sum(b, axis=0) of out = a @ b as it is, or None."""
    if args.batch != 1:
        return "a batched product (the epilogue is planned for 2-D products)"
    if np.dtype(sum_dtype) != np.dtype(dtype) or np.dtype(dtype) not in (np.float16, np.float32):
        return f"{np.dtype(dtype)} data with a {np.dtype(sum_dtype)} sum (the epilogue is used for float16 and float32)"
    n = args.m if args.first == "b" else args.n
    if tuple(sum_shape) != (n,) or (n > 1 and sum_strides[0] != np.dtype(dtype).itemsize):
        return "a sum that is not one contiguous row of the result's width"
    return None


def _alignment(*ptrs) -> tuple:
    """Per pointer, the largest power of two up to 256 dividing it: what the heuristic may assume."""
    return tuple(min(256, p & -p) if p else 256 for p in ptrs)


class _Lt:
    """libcublasLt through ctypes (as cublas_gemm calls libcublas), with one handle per device."""

    def __init__(self):
        import ctypes
        lib = load_library("cublasLt")
        p, i, u64, i64, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64, ctypes.c_size_t
        pp = ctypes.POINTER(p)
        f = checked
        self.create = f(lib.cublasLtCreate, [pp])
        self.desc_create = f(lib.cublasLtMatmulDescCreate, [pp, i, i])
        self.desc_set = f(lib.cublasLtMatmulDescSetAttribute, [p, i, p, sz])
        self.layout_create = f(lib.cublasLtMatrixLayoutCreate, [pp, i, u64, u64, i64])
        self.pref_create = f(lib.cublasLtMatmulPreferenceCreate, [pp])
        self.pref_set = f(lib.cublasLtMatmulPreferenceSetAttribute, [p, i, p, sz])
        self.heuristic = f(lib.cublasLtMatmulAlgoGetHeuristic, [p, p, p, p, p, p, p, i, p, ctypes.POINTER(i)])
        self.matmul = f(lib.cublasLtMatmul, [p, p, p, p, p, p, p, p, p, p, p, p, p, p, sz, p])
        self.ctypes = ctypes
        self.handles: dict = {}

    def handle(self, device_id: int):
        h = self.handles.get(device_id)
        if h is None:
            import cupy
            with cupy.cuda.Device(device_id):
                handle = self.ctypes.c_void_p()
                self.create(self.ctypes.byref(handle))
            h = self.handles[device_id] = handle.value
        return h


_lt: list = []
_plans: dict = {}       # (device, args, dtype, epilogue, compute type, alignments) -> _Plan, kept for good


def _library() -> _Lt:
    if not _lt:
        _lt.append(_Lt())
    return _lt[0]


class _Plan:
    """The descriptors and algorithm of one epilogue GEMM: made once (the heuristic query is host
    work), used by every call with the same shapes, layouts, dtype and alignments."""

    def __init__(self, lt, handle, args: GemmArguments, dtype, epilogue: str, alignments, compute):
        c = lt.ctypes
        data_type = _DATA_TYPE[np.dtype(dtype)]
        scale = _DATA_TYPE[np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)]
        self.desc = c.c_void_p()
        lt.desc_create(c.byref(self.desc), compute, scale)
        for attr, value in ((_DESC_TRANSA, args.transa), (_DESC_TRANSB, args.transb),
                            (_DESC_EPILOGUE, EPILOGUES[epilogue])):
            v = c.c_int32(value)
            lt.desc_set(self.desc, attr, c.byref(v), c.sizeof(v))
        rows_a = (args.m, args.k) if args.transa == 0 else (args.k, args.m)
        rows_b = (args.k, args.n) if args.transb == 0 else (args.n, args.k)
        self.layouts = []
        for (rows, cols), ld in ((rows_a, args.lda), (rows_b, args.ldb), ((args.m, args.n), args.ldc)):
            layout = c.c_void_p()
            lt.layout_create(c.byref(layout), data_type, rows, cols, ld)
            self.layouts.append(layout)
        pref = c.c_void_p()
        lt.pref_create(c.byref(pref))
        ws = c.c_uint64(WORKSPACE_BYTES)
        lt.pref_set(pref, _PREF_MAX_WORKSPACE, c.byref(ws), c.sizeof(ws))
        for attr, align in zip(_PREF_ALIGNMENT, alignments):
            v = c.c_uint32(align)
            lt.pref_set(pref, attr, c.byref(v), c.sizeof(v))
        self.result = (c.c_uint8 * _HEURISTIC_BYTES)()
        found = c.c_int(0)
        a_desc, b_desc, d_desc = self.layouts
        lt.heuristic(handle, self.desc, a_desc, b_desc, d_desc, d_desc, pref, 1, c.byref(self.result), c.byref(found))
        if found.value < 1:
            raise RuntimeError("cuBLASLt proposed no algorithm for this epilogue GEMM")
        self.pref = pref        # kept with the descriptors (never destroyed: a few per process)


def run_epilogue_gemm(args: GemmArguments, a, b, bias, out, epilogue: str = "relu_bias") -> None:
    """out[...] = relu(a @ b + bias) ("relu_bias") or a @ b + bias ("bias"); or out[...] = a @ b and
    bias[...] = b.sum(axis=0) ("bgrada" / "bgradb", as bgrad_kind says): on the current stream of out's
    device, one cuBLASLt call, `args` from cublas_gemm.arguments_for (epilogue_refusal or bgrad_refusal None)."""
    length = args.n if epilogue == "bgradb" else args.m     # BGRADB: one per column of D; else one per row
    if bias.size != length or args.batch != 1:          # cuBLASLt would read or write past the vector
        raise ValueError(f"cuBLASLt {epilogue} epilogue: a vector of {length} elements is needed for "
                         f"{args}; got {bias.shape}")
    import cupy
    lt = _library()
    device = out.device.id
    handle = lt.handle(device)
    x, y = (a, b) if args.first == "a" else (b, a)
    ptrs = (x.data.ptr, y.data.ptr, out.data.ptr, bias.data.ptr)
    compute = compute_type(out.dtype)
    key = (device, args, out.dtype, epilogue, compute, _alignment(*ptrs[:3], ptrs[2]))
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _Plan(lt, handle, args, out.dtype, epilogue, key[-1], compute)
    c = lt.ctypes
    bias_ptr = c.c_void_p(ptrs[3])
    lt.desc_set(plan.desc, _DESC_BIAS_POINTER, c.byref(bias_ptr), c.sizeof(bias_ptr))
    one, zero = _ONE_ZERO[np.dtype(np.float64) if out.dtype == np.float64 else np.dtype(np.float32)]
    _, workspace = _handle_for(_lib(), device)
    a_desc, b_desc, d_desc = plan.layouts
    lt.matmul(handle, plan.desc, one.ctypes.data, ptrs[0], a_desc, ptrs[1], b_desc, zero.ctypes.data,
              ptrs[2], d_desc, ptrs[2], d_desc, c.addressof(plan.result), workspace.data.ptr, WORKSPACE_BYTES,
              cupy.cuda.get_current_stream().ptr)
    if launch_log.listeners:
        launch_log.record(launch_log.KernelRecord("matmul", "cuda", "matmul", int(out.size), "memory", 0.0,
                                                  f"cuBLASLt {epilogue.upper()} epilogue"))
