"""Whether the cuDNN CBR path can take a call, answered before any graph is built.

Both answers are strings for `lt.explain` (None means yes): the planner prints them when it takes
the fallback path, and `fused=True` turns them into errors.
"""

from __future__ import annotations

import functools

from .cudnn_dtypes import CONV_DTYPES, dtype_name


def cudnn_dtype_refusal(dtype) -> str | None:
    """Why no cuDNN conv graph is built for this dtype, or None (cudnn_dtypes.CONV_DTYPES)."""
    name = dtype_name(dtype)
    if name in CONV_DTYPES:
        return None
    return f"cuDNN convolutions take {', '.join(sorted(CONV_DTYPES))}; got {name}"


def cudnn_shape_refusal(x_shape, w_shape, dtype) -> str | None:
    """Why the cuDNN path will not take this conv, or None.

    The path runs NHWC tensors of the dtypes in cudnn_dtypes.CONV_DTYPES; cuDNN's fused
    (runtime-compiled) engines move 16 bytes (8 halves) per load along the channel axis, so C and K
    must be multiples of 8 (kept for every dtype: one rule, which the channel padding meets).
    """
    why = cudnn_dtype_refusal(dtype)
    if why is not None:
        return why
    c, k = int(x_shape[-1]), int(w_shape[0])
    if c % 8:
        return f"in-channels C={c} is not a multiple of 8 (cuDNN's fused engines load 16 bytes at a time): pad C to {c + (-c) % 8}"
    if k % 8:
        return f"out-channels K={k} is not a multiple of 8 (cuDNN's fused engines store 16 bytes at a time): pad K to {k + (-k) % 8}"
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


def cudnn_fix(dtype) -> str:
    """What a user can do where the cuDNN path refuses a conv of this dtype (for the error's text)."""
    if cudnn_unavailable_reason() is not None:
        return ("install the 'cuda' extra (cupy-cuda13x, nvidia-cudnn-cu13, nvidia-cudnn-frontend) on a machine "
                "with an NVIDIA GPU, or run on device='cpu'")
    if cudnn_dtype_refusal(dtype) is not None:
        return "cast x and w to float32 or float16 (x.astype(lt.float32))"
    return "zero-pad the channels to a multiple of 8"
