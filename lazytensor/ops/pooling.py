"""max_pool2d and avg_pool2d on NHWC tensors, and their backward ops: heavy nodes.

Design: docs/design/plans.md, section "lazytensor/ops/pooling.py".
"""
from __future__ import annotations

from dataclasses import dataclass

from lazytensor.core.expr import as_computed
from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import Expr
from lazytensor.core.dtypes import is_float


@dataclass(frozen=True)
class PoolAttrs:
    kind: str           # "max" or "avg"
    kernel: tuple       # (kh, kw)
    stride: tuple       # (sh, sw)
    padding: tuple      # (ph, pw)
    in_shape: tuple     # (N, H, W, C) of the pooled input: the backward's output shape


def _pair(v, name: str, op: str) -> tuple:
    items = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(items) != 2 or not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        raise TypeError(f"{op}: {name} must be an int or a pair of ints (h, w); got {v!r}")
    return items


def pool_attrs(kind: str, shape: tuple, kernel, stride, padding) -> PoolAttrs:
    """The checked attributes of a pooling of an input of `shape`, with PyTorch's errors."""
    op = f"{kind}_pool2d"
    if len(shape) != 4:
        raise ValueError(f"{op} expects an NHWC input (batch, height, width, channels); got shape {shape}")
    kernel = _pair(kernel, "kernel", op)
    stride = kernel if stride is None else _pair(stride, "stride", op)
    padding = _pair(padding, "padding", op)
    if min(kernel) < 1 or min(stride) < 1:
        raise ValueError(f"{op}: kernel and stride must be positive; got kernel {kernel}, stride {stride}")
    if min(padding) < 0 or any(2 * p > k for p, k in zip(padding, kernel)):
        raise ValueError(f"{op}: padding must be between 0 and half the kernel size (PyTorch's rule: every "
                         f"window keeps a cell of the input); got padding {padding} for kernel {kernel}")
    _, h, w, _ = shape
    if h + 2 * padding[0] < kernel[0] or w + 2 * padding[1] < kernel[1]:
        raise ValueError(f"{op}: the kernel {kernel} is larger than the padded input "
                         f"({h + 2 * padding[0]}, {w + 2 * padding[1]}) of input shape {shape}")
    return PoolAttrs(kind, kernel, stride, padding, tuple(shape))


def pooled_shape(a: PoolAttrs) -> tuple:
    n, h, w, c = a.in_shape
    return (n, (h + 2 * a.padding[0] - a.kernel[0]) // a.stride[0] + 1,
            (w + 2 * a.padding[1] - a.kernel[1]) // a.stride[1] + 1, c)


def _float_input(x, op: str):
    x = _tensor.as_node(x)
    if not is_float(x.dtype):
        raise TypeError(f"{op} takes floating-point input (float16, float32, float64); got {x.dtype.name}: "
                        f"convert it with .astype(...) first")
    return x


def _pool(kind: str, x, kernel, stride, padding):
    x = _float_input(x, f"{kind}_pool2d")
    a = pool_attrs(kind, tuple(x.shape), kernel, stride, padding)
    return Expr(f"{kind}_pool2d", (x,), pooled_shape(a), x.dtype, x.device, heavy=True, attrs=a)


def max_pool2d(x, kernel, stride=None, padding=0):
    """Max over each kh x kw window of NHWC x (PyTorch's F.max_pool2d on NHWC); pads with -inf."""
    return _pool("max", x, kernel, stride, padding)


def avg_pool2d(x, kernel, stride=None, padding=0):
    """Mean over each kh x kw window of NHWC x, the zero padding counted (PyTorch's F.avg_pool2d
    with count_include_pad=True)."""
    return _pool("avg", x, kernel, stride, padding)


def pool_backward(node, g):
    """The gradient with respect to the pooled input of `node` (a max_pool2d or avg_pool2d node),
    given `g`, the gradient of its output: a heavy node of the input's shape."""
    node = as_computed(node)        # an evaluated node: as it was computed
    a = node.attrs
    g = _tensor.as_node(g)
    if tuple(g.shape) != tuple(node.shape):
        raise ValueError(f"{node.op} backward: the output gradient must have the output's shape "
                         f"{tuple(node.shape)}; got {tuple(g.shape)}")
    x = node.args[0]
    g = g.astype(x.dtype)
    if a.kind == "max":
        return Expr("max_pool2d_backward", (x, g), a.in_shape, x.dtype, x.device, heavy=True, attrs=a)
    return Expr("avg_pool2d_backward", (g,), a.in_shape, x.dtype, x.device, heavy=True, attrs=a)
