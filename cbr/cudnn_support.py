"""Whether the cuDNN CBR path can take a call, answered before any graph is built.

Both answers are strings for `lt.explain` (None means yes): the planner prints them when it takes
the fallback path, and `fused=True` turns them into errors.
"""

from __future__ import annotations

import functools

import numpy as np


def cudnn_shape_refusal(x_shape, w_shape, dtype) -> str | None:
    """Why the fused cuDNN path will not take this conv, or None.

    The path runs float16 NHWC tensors; cuDNN's fused (runtime-compiled) engines move 8 halves
    (16 bytes) per load along the channel axis, so C and K must be multiples of 8.
    """
    dt = np.dtype(dtype)
    if dt != np.float16:
        return f"the cuDNN path takes float16 activations and weights; got {dt.name} (cast to float16, or run on the CPU path)"
    c, k = int(x_shape[-1]), int(w_shape[0])
    if c % 8:
        return f"in-channels C={c} is not a multiple of 8 (cuDNN's fused engines load 8 halves at a time): pad C to {c + (-c) % 8}"
    if k % 8:
        return f"out-channels K={k} is not a multiple of 8 (cuDNN's fused engines store 8 halves at a time): pad K to {k + (-k) % 8}"
    return None


@functools.lru_cache(maxsize=1)
def cudnn_unavailable_reason() -> str | None:
    """Why no cuDNN path exists in this process (no CuPy, no frontend binding, no device), or None."""
    try:
        import cupy
    except Exception as e:  # noqa: BLE001 - any import failure means the same thing here
        return f"CuPy is not importable ({e})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        return f"no CUDA device ({e})"
    if count == 0:
        return "no CUDA device"
    try:
        import cudnn  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return f"the cuDNN frontend binding is not importable ({e})"
    return None
