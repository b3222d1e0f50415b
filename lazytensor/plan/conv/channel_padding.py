"""Convolutions whose channel counts cuDNN's fused engines refuse, run by cuDNN on zero-padded copies.

Design: docs/design/plans.md, section "lazytensor/plan/conv/channel_padding.py".
"""
from __future__ import annotations

from lazytensor.plan.conv.steps import ChannelPadded, Conv2dStep, ConvBackwardStep


def pad8(n: int) -> int:
    return n + (-n) % 8


def padded_shapes(x_shape, w_shape) -> tuple:
    """(x shape, w shape) with C and K rounded up to multiples of 8."""
    n, h, w, c = x_shape
    k, r, s, _ = w_shape
    return (n, h, w, pad8(c)), (pad8(k), r, s, pad8(c))


def channels_only_refusal(x_shape, w_shape, dtype) -> bool:
    """True when cuDNN's shape rule refuses this conv for its channel counts alone (padding fixes it)."""
    from lazytensor.cbr.cudnn_support import cudnn_shape_refusal
    return (cudnn_shape_refusal(x_shape, w_shape, dtype) is not None
            and cudnn_shape_refusal(*padded_shapes(x_shape, w_shape), dtype) is None)


def cudnn_after_padding(x_shape, w_shape, dtype) -> bool:
    """Whether to run this conv as a ChannelPadded step: cuDNN is there and refuses only the channels."""
    from lazytensor.cbr.cudnn_support import cudnn_unavailable_reason
    return cudnn_unavailable_reason() is None and channels_only_refusal(x_shape, w_shape, dtype)


def _pad(backend, a, axes, pads):
    """a, or a zeroed buffer with the given axes rounded up to multiples of 8 (recorded in pads)."""
    shape = list(a.shape)
    for axis in axes:
        shape[axis] = pad8(shape[axis])
    if tuple(shape) == tuple(a.shape):
        return a
    buffer = backend.empty(tuple(shape), a.dtype)
    view = buffer[tuple(slice(0, a.shape[i]) for i in range(a.ndim))]
    pads.append((a, buffer, view))
    return buffer


def _output(backend, out, axes):
    """(the buffer the inner step writes, the view of it that out receives): out itself, and None,
    where out needs no padding."""
    shape = list(out.shape)
    for axis in axes:
        shape[axis] = pad8(shape[axis])
    if tuple(shape) == tuple(out.shape):
        return out, None
    buffer = backend.empty(tuple(shape), out.dtype)
    return buffer, buffer[tuple(slice(0, n) for n in out.shape)]


def _why(x_shape, w_shape, dtype) -> str:
    from lazytensor.cbr.cudnn_support import cudnn_shape_refusal
    return f"cuDNN path not taken for the conv as it is: {cudnn_shape_refusal(x_shape, w_shape, dtype)}"


def _what(x_shape, w_shape) -> str:
    (c, k), (cp, kp) = (x_shape[-1], w_shape[0]), (pad8(x_shape[-1]), pad8(w_shape[0]))
    parts = [f"{name} {n} -> {p}" for name, n, p in (("C", c, cp), ("K", k, kp)) if n != p]
    return "channels zero-padded for cuDNN (" + ", ".join(parts) + ")"


def padded_forward(backend, x, w, attrs, y, path="cudnn"):
    """y = conv2d(x, w) (NHWC x, KRSC w) as a ChannelPadded step."""
    pads: list = []
    xp, wp = _pad(backend, x, (3,), pads), _pad(backend, w, (0, 3), pads)
    yp, result = _output(backend, y, (3,))
    return ChannelPadded(Conv2dStep(backend, xp, wp, attrs, yp, path), pads, result, y, _what(x.shape, w.shape),
                         _why(x.shape, w.shape, x.dtype))


def padded_backward(backend, kind, a, b, x_shape, w_shape, attrs, out, path="cudnn", note=""):
    """A ConvBackwardStep's arguments (dgrad: a = dy, b = w, out = dx; wgrad: a = x, b = dy, out = dw)
    -> the same computation as a ChannelPadded step."""
    pads: list = []
    if kind == "dgrad":
        ap, bp = _pad(backend, a, (3,), pads), _pad(backend, b, (0, 3), pads)
        op, result = _output(backend, out, (3,))
    else:
        ap, bp = _pad(backend, a, (3,), pads), _pad(backend, b, (3,), pads)
        op, result = _output(backend, out, (0, 3))
    xs, ws = padded_shapes(x_shape, w_shape)
    inner = ConvBackwardStep(backend, kind, ap, bp, xs, ws, attrs, op, path, note)
    return ChannelPadded(inner, pads, result, out, _what(x_shape, w_shape), _why(x_shape, w_shape, a.dtype))
