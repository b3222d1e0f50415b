"""What NumPy's functions take as an array, as an operand: tensors and expressions as they are,
NumPy arrays as CPU tensors over a copy (read when the call is made), and anything else NumPy
would make an array of (scalars, NumPy scalars, nested lists) through lt.asarray."""
from __future__ import annotations

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.operand import Operand


def operand(x):
    if isinstance(x, Operand):
        return x
    if isinstance(x, np.ndarray):
        return _tensor.as_node(x)
    return _tensor.asarray(x)
