"""The element types of the cuDNN graphs, keyed by NumPy dtype name: what each graph kind takes,
the cuDNN types of its tensors, which engines its math excludes (TF32), and the words explain uses.

Design: docs/design/cbr.md, section "cbr/cudnn_dtypes.py".
"""
from __future__ import annotations

import numpy as np

# dtype name -> (cudnn.data_type name of the tensors, of the accumulation and the statistics)
CUDNN_TYPES = {
    "float16": ("HALF", "FLOAT"),
    "bfloat16": ("BFLOAT16", "FLOAT"),
    "float32": ("FLOAT", "FLOAT"),
    "float64": ("DOUBLE", "DOUBLE"),
}
# The dtypes each graph kind is built for. Measured on the H200 (cuDNN 9.19, frontend 1.32):
# conv_fprop builds in float16, bfloat16 and float32; conv_fprop + genstats only in float16 (no
# engine in float32 or bfloat16), so those take the plain conv and lazytensor's statistics reduction.
# float64 is tried for the convolutions alone (cuDNN's legacy engines offer double); a rejection
# raises (lt.config.allow_host runs it on the host). The fused epilogue graphs mix float32
# per-channel vectors into the graph: not for float64.
CONV_DTYPES = frozenset(CUDNN_TYPES)
GRAPH_DTYPES = {
    "conv": CONV_DTYPES,
    "conv_dgrad": CONV_DTYPES,
    "conv_wgrad": CONV_DTYPES,
    "conv_genstats": frozenset({"float16"}),
    "conv_scale_bias_relu": frozenset({"float16", "bfloat16", "float32"}),
    "dbn_relu": frozenset({"float16", "bfloat16", "float32"}),
}


def dtype_name(dtype) -> str:
    """NumPy's name of a dtype (ml_dtypes' bfloat16 is "bfloat16")."""
    return np.dtype(dtype).name


def graph_refusal(kind: str, dtype) -> str | None:
    """Why the `kind` graph is not built for this dtype, or None."""
    name = dtype_name(dtype)
    taken = GRAPH_DTYPES[kind]
    if name in taken:
        return None
    if kind == "conv_genstats" and name in CONV_DTYPES:
        return f"cuDNN has no conv_fprop + genstats engine in {name} (only float16)"
    return f"the cuDNN {kind} graph takes {', '.join(sorted(taken))}; got {name}"


def uses_tf32(dtype, allow_tf32: bool) -> bool:
    """Whether a float32 conv may run on TF32 tensor cores: only float32 has the choice."""
    return bool(allow_tf32) and dtype_name(dtype) == "float32"


def data_types(cudnn, dtype) -> tuple:
    """(io type, intermediate/compute type) as cudnn.data_type values."""
    io, compute = CUDNN_TYPES[dtype_name(dtype)]
    return getattr(cudnn.data_type, io), getattr(cudnn.data_type, compute)


def excluded_notes(cudnn, dtype, tf32: bool) -> list:
    """The numerical notes whose engines a graph of this dtype must not run (PyTorch's rule): for
    float32 and float64, engines that down-convert their inputs; for float32 without TF32, every
    tensor-core engine (on float32 data they compute in TF32). float16 and bfloat16: none."""
    name = dtype_name(dtype)
    notes = []
    if name in ("float32", "float64"):
        notes.append(cudnn.numerical_note.DOWN_CONVERT_INPUTS)
    if name == "float32" and not tf32:
        notes.append(cudnn.numerical_note.TENSOR_CORE)
    return notes


def math_words(dtype, tf32: bool) -> str:
    """What explain says of a conv's math, e.g. "float32 (TF32 tensor cores allowed)"."""
    name = dtype_name(dtype)
    if name == "float32":
        return ("float32 (TF32 tensor cores allowed: lt.config.conv_allow_tf32)" if tf32
                else "float32 (strict: no TF32 engine, lt.config.conv_allow_tf32 = False)")
    if name == "float64":
        return "float64 (double accumulation)"
    return f"{name} (float32 accumulation)"
