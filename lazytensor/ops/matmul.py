"""`a @ b` and lt.matmul: NumPy's matmul as a heavy node (op "matmul").

Semantics are np.matmul's: the last two axes are matrices and the leading ones a batch that
broadcasts; a 1-D first operand is a row vector and a 1-D second operand a column vector, whose
unit axis is removed from the result; 0-d operands are refused. The result dtype is NumPy's
promotion of the two dtypes, and each operand is cast to it first (np.matmul's loop does the same),
so the planner's step (lazytensor.plan.heavy.matmul) sees one dtype. Elementwise work on the result
(`relu(x @ w + b)`) fuses into the kernel after the matmul step.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import Expr, astype
from lazytensor.core.operand import Operand

_SIGNATURE = "(n?,k),(k,m?)->(n?,m?)"


def _operand(x, position: int):
    if isinstance(x, Operand):
        return x
    if isinstance(x, np.ndarray):
        return _tensor.as_node(x)
    raise TypeError(f"matmul: operand {position} is a {type(x).__name__}, not a tensor; matmul takes no "
                    f"scalars (use * to scale)")


def matmul_shape(a_shape: tuple, b_shape: tuple) -> tuple:
    """The result shape of np.matmul for these operand shapes, or NumPy's error."""
    for position, shape in enumerate((a_shape, b_shape)):
        if len(shape) == 0:
            raise ValueError(f"matmul: Input operand {position} does not have enough dimensions (has 0, gufunc "
                             f"core with signature {_SIGNATURE} requires 1); use * to multiply by a scalar")
    a2 = a_shape if len(a_shape) > 1 else (1,) + a_shape
    b2 = b_shape if len(b_shape) > 1 else b_shape + (1,)
    if a2[-1] != b2[-2]:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature "
                         f"{_SIGNATURE} (size {b2[-2]} is different from {a2[-1]}): shapes {a_shape} and {b_shape}")
    try:
        batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        raise ValueError(f"matmul: the batch axes of shapes {a_shape} and {b_shape} (all but the last two) "
                         f"cannot be broadcast: {a2[:-2]} and {b2[:-2]}") from None
    return batch + a_shape[-2:-1] * (len(a_shape) > 1) + b_shape[-1:] * (len(b_shape) > 1)


def matmul(a, b):
    """Matrix product with np.matmul's semantics (1-D operands, batches, broadcast batch axes, NumPy's
    result dtype; bfloat16 for bfloat16 operands, as np.dot and JAX give: ml_dtypes has no matmul
    loop, so np.matmul computes theirs in float32). Lazy: a step of its own (NumPy's BLAS on the CPU,
    cuBLAS through CuPy on CUDA)."""
    a = _operand(a, 0)
    b = _operand(b, 1)
    shape = matmul_shape(tuple(a.shape), tuple(b.shape))
    if a.device != b.device:
        raise ValueError(f"matmul: a is on {a.device!r} but b is on {b.device!r}: move one with "
                         f"lt.asarray(x, device={a.device!r})")
    dtype = np.result_type(a.dtype, b.dtype)
    return Expr("matmul", (astype(a, dtype), astype(b, dtype)), shape, dtype, a.device, heavy=True)


def rmatmul(b, a):
    """`a @ b` where only b is a lazytensor operand."""
    return matmul(a, b)
