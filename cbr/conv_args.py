"""The arguments of a 2-D convolution with NHWC activations and KRSC weights: normalised and checked.

Every conv path (the NumPy one, the cuDNN graphs, the frontend's conv2d node) calls
`validate_conv_args` first, so a bad call fails the same way, with a message that names
both shapes, before any memory is touched.

Layouts:
    x: (N, H, W, C)   batch, rows, columns, in-channels (channels last)
    w: (K, R, S, C)   out-channels, window rows, window columns, in-channels
    y: (N, P, Q, K)   P = (H + 2*pad_h - dil_h*(R-1) - 1) // stride_h + 1, Q likewise
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lazytensor.kernels.ops import BFLOAT16

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64), BFLOAT16)


class CheckedConv(NamedTuple):
    """What `validate_conv_args` hands back: the (h, w) pairs and the output shape."""

    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    out_shape: tuple[int, int, int, int]


def as_pair(value, name: str) -> tuple[int, int]:
    """An int or an (h, w) pair of ints, as an (h, w) tuple."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value), int(value)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value
    ):
        return int(value[0]), int(value[1])
    raise TypeError(f"{name} must be an int or a pair of ints (h, w); got {value!r}")


def conv_output_shape(x_shape, w_shape, stride=1, padding=0, dilation=1) -> tuple[int, int, int, int]:
    """(N, P, Q, K) of conv2d_nhwc; no checks beyond the arithmetic (see validate_conv_args)."""
    n, h, w, _ = x_shape
    k, r, s, _ = w_shape
    sh, sw = as_pair(stride, "stride")
    ph, pw = as_pair(padding, "padding")
    dh, dw = as_pair(dilation, "dilation")
    p = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1
    q = (w + 2 * pw - dw * (s - 1) - 1) // sw + 1
    return int(n), int(p), int(q), int(k)


def validate_conv_args(x_shape, w_shape, x_dtype, w_dtype, stride=1, padding=0, dilation=1) -> CheckedConv:
    """Check a conv2d call; raise ValueError (shapes, sizes) or TypeError (dtypes, argument kinds)."""
    x_shape, w_shape = tuple(int(d) for d in x_shape), tuple(int(d) for d in w_shape)
    if len(x_shape) != 4:
        raise ValueError(
            f"conv2d expects x of rank 4, (N, H, W, C) with channels last; got rank {len(x_shape)} with shape {x_shape}"
        )
    if len(w_shape) != 4:
        raise ValueError(
            "conv2d expects w of rank 4, (K, R, S, C): out-channels, window rows, window columns, in-channels; "
            f"got rank {len(w_shape)} with shape {w_shape}"
        )
    if min(x_shape) <= 0:
        raise ValueError(f"conv2d got an empty x: shape {x_shape} (N, H, W, C) has a dimension <= 0")
    if min(w_shape) <= 0:
        raise ValueError(f"conv2d got an empty w: shape {w_shape} (K, R, S, C) has a dimension <= 0")
    if x_shape[3] != w_shape[3]:
        raise ValueError(
            f"x has {x_shape[3]} channels but w expects {w_shape[3]} "
            f"(x is NHWC with shape {x_shape}, w is KRSC with shape {w_shape})"
        )

    xd, wd = np.dtype(x_dtype), np.dtype(w_dtype)
    for name, dt in (("x", xd), ("w", wd)):
        if dt not in FLOAT_DTYPES:
            raise TypeError(f"conv2d takes floating-point x and w (float16, bfloat16, float32 or float64); {name} is {dt}")
    if xd != wd:
        raise TypeError(f"x is {xd} but w is {wd}; cast one so that both have the same dtype")

    stride_hw = as_pair(stride, "stride")
    padding_hw = as_pair(padding, "padding")
    dilation_hw = as_pair(dilation, "dilation")
    if min(stride_hw) <= 0:
        raise ValueError(f"stride must be positive; got {stride_hw}")
    if min(dilation_hw) <= 0:
        raise ValueError(f"dilation must be positive; got {dilation_hw}")
    if min(padding_hw) < 0:
        raise ValueError(f"padding must be >= 0; got {padding_hw}")

    out_shape = conv_output_shape(x_shape, w_shape, stride_hw, padding_hw, dilation_hw)
    if out_shape[1] <= 0 or out_shape[2] <= 0:
        n, h, w, _ = x_shape
        _, r, s, _ = w_shape
        eff_r = dilation_hw[0] * (r - 1) + 1
        eff_s = dilation_hw[1] * (s - 1) + 1
        raise ValueError(
            f"conv2d output would be empty ({out_shape[1]}x{out_shape[2]}): the padded input "
            f"{h + 2 * padding_hw[0]}x{w + 2 * padding_hw[1]} (x {h}x{w}, padding {padding_hw}) is smaller than "
            f"the dilated window {eff_r}x{eff_s} (R={r}, S={s}, dilation {dilation_hw}); pad more or use a smaller window"
        )
    return CheckedConv(stride_hw, padding_hw, dilation_hw, out_shape)
