"""Gradient rules of the ops real models need: matmul and the 2-D poolings (their backward ops are
ops of their own, lazytensor.ops.pooling). logsumexp, softmax, log_softmax and cross_entropy need no
rule: they are composed of elementwise ops and reductions, whose rules give their gradients."""
from __future__ import annotations

from lazytensor.autodiff.rules import differentiable, gradient_rule
from lazytensor.ops.matmul import matmul
from lazytensor.ops.pooling import avg_pool2d, pool_backward
from lazytensor.ops.reductions import reduce
from lazytensor.ops.views import reshape, swapaxes


def sum_to_shape(e, shape: tuple):
    """`e` summed over the axes along which `shape` was broadcast to e's shape (leading axes, and
    unit axes of `shape`), so that the result has `shape`."""
    shape = tuple(shape)
    lead = len(e.shape) - len(shape)
    if lead:
        e = reduce("sum", e, tuple(range(lead)))
    units = tuple(i for i, (d, s) in enumerate(zip(shape, e.shape)) if d == 1 and s != 1)
    if units:
        e = reduce("sum", e, units, keepdims=True)
    return e


@gradient_rule("matmul")
def matmul_gradient(node, grad):
    """C = A @ B: dA = G @ B^T, dB = A^T @ G, over the operands as matrices (a 1-D A is a row,
    a 1-D B a column), each summed over the batch axes its operand was broadcast along."""
    a, b = node.args
    a2 = a if len(a.shape) > 1 else reshape(a, (1,) + tuple(a.shape))
    b2 = b if len(b.shape) > 1 else reshape(b, tuple(b.shape) + (1,))
    batch = tuple(node.shape[:len(node.shape) - (len(a.shape) > 1) - (len(b.shape) > 1)])
    g2 = reshape(grad, batch + (a2.shape[-2], b2.shape[-1]))
    da = db = None
    if differentiable(a.dtype):
        da = reshape(sum_to_shape(matmul(g2, swapaxes(b2, -1, -2)), a2.shape), tuple(a.shape))
    if differentiable(b.dtype):
        db = reshape(sum_to_shape(matmul(swapaxes(a2, -1, -2), g2), b2.shape), tuple(b.shape))
    return da, db


@gradient_rule("max_pool2d", "avg_pool2d")
def pool_gradient(node, grad):
    """Max pooling: each window's gradient to its argmax; average: spread evenly (ops.pooling)."""
    return (pool_backward(node, grad),)


@gradient_rule("avg_pool2d_backward")
def avg_pool_backward_gradient(node, grad):
    """avg_pool2d_backward is linear in its output gradient; its adjoint is avg_pool2d itself
    (each window sums its cells, the padding being zeros, and divides by kh * kw)."""
    a = node.attrs
    return (avg_pool2d(grad, a.kernel, a.stride, a.padding),)
