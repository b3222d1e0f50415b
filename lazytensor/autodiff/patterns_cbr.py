"""The fused CBR backward as backward patterns (lazytensor.autodiff.patterns), in training.

Design: docs/design/cbr-backward.md, section "lazytensor/autodiff/patterns_cbr.py".
"""
from __future__ import annotations

import numpy as np

from lazytensor.autodiff.patterns import BACKWARD_PATTERNS
from lazytensor.core.expr import Expr
from lazytensor.ops.cbr_backward import (cbr_bn_backward, cbr_bn_backward_in_plan, cbr_bn_backward_masked,
                                         masked_gradient)
from lazytensor.ops.conv_backward import conv2d_backward_data, conv2d_backward_filter
from lazytensor.autodiff.origin import as_computed
from lazytensor.ops.views import broadcast_to


def _conv_bn(node):
    """(bn, conv) when node = batch_norm(conv2d(x, w)) in training, else None."""
    if not (isinstance(node, Expr) and node.op == "batch_norm" and node.result is None and node.attrs.training):
        return None
    conv = node.args[0]
    if not (isinstance(conv, Expr) and conv.op == "conv2d" and conv.result is None):
        return None
    return node, conv


def _complete(bn, relu: bool) -> bool:
    try:
        bn.attrs.saved.forward_results(relu, "")
    except ValueError:
        return False
    return True


class CbrBackward:
    """One form of the pattern: "relu", "residual" or "bn" (no ReLU)."""

    def __init__(self, form: str):
        self.form = form

    def parts(self, node):
        """(bn, conv, skip) of `node` in this form, or None."""
        node = as_computed(node)
        if self.form == "bn":
            found = _conv_bn(node)
            return None if found is None else (*found, None)
        if not (isinstance(node, Expr) and node.op == "relu"):
            return None
        inner = node.args[0]
        if self.form == "relu":
            found = _conv_bn(inner)
            return None if found is None else (*found, None)
        if not (isinstance(inner, Expr) and inner.op == "add" and inner.result is None):
            return None
        for a, b in (inner.args, inner.args[::-1]):
            found = _conv_bn(a)
            if found is not None and tuple(b.shape) == tuple(a.shape) and b.dtype == a.dtype:
                return (*found, b)
        return None

    def match(self, node) -> bool:
        found = self.parts(node)
        # float64 activations take the per-op rules: the saved statistics are float32 (as cuDNN's),
        # which would cost a float64 gradient its precision
        return found is not None and found[0].dtype != np.float64

    def saved_in_holder(self, node) -> bool:
        """True when stage 1 reads the evaluated forward's holder, False when the forward's own plan."""
        return _complete(self.parts(node)[0], self.form != "bn")

    def gradients(self, node, grad, wanted=None) -> dict:
        bn, conv, skip = self.parts(node)
        x, w = conv.args
        gamma, beta = bn.args[1], bn.args[2]
        if tuple(grad.shape) != tuple(node.shape):
            grad = broadcast_to(grad, node.shape)
        relu, residual = self.form != "bn", self.form == "residual"
        masked = masked_gradient(grad) if self.form == "bn" else None
        if masked is not None:          # a downsample under a residual relu: its dBN reads dY and that mask
            dy, mask = masked
            if _complete(bn, False):
                d_conv, dgamma, dbeta, d_skip = cbr_bn_backward_masked(dy, mask, bn.attrs.saved, gamma)
            else:
                d_conv, dgamma, dbeta, d_skip = cbr_bn_backward_in_plan(dy, bn, None, gamma, mask=mask)
        elif _complete(bn, relu):
            d_conv, dgamma, dbeta, d_skip = cbr_bn_backward(grad, bn.attrs.saved, gamma, relu=relu, residual=residual)
        else:
            d_conv, dgamma, dbeta, d_skip = cbr_bn_backward_in_plan(grad, bn, as_computed(node), gamma, relu=relu,
                                                                    residual=residual)
        grads: dict = {}
        first_layer = wanted is not None and not any(t is x for t in wanted)
        pairs = [] if first_layer else [(x, conv2d_backward_data(d_conv, w, x.shape, conv.attrs))]
        pairs += [(w, conv2d_backward_filter(x, d_conv, w.shape, conv.attrs, first_layer=first_layer)),
                 (gamma, dgamma.astype(gamma.dtype)), (beta, dbeta.astype(beta.dtype))]
        if skip is not None:
            pairs.append((skip, d_skip))
        for operand, g in pairs:        # one operand in two places (gamma passed as beta too): the sum
            grads[operand] = g if operand not in grads else grads[operand] + g
        return grads

    def describe(self, node, grad, wanted) -> str:
        """What gradients(node, grad, wanted) builds, for lt.explain."""
        bn, conv, _ = self.parts(node)
        x, w = conv.args
        relu = self.form != "bn"
        source = ("the evaluated forward's BatchNormSaved" if _complete(bn, relu) else
                  "the forward's own steps in this plan")
        dgrad = ("then wgrad and dgrad" if any(t is x for t in wanted) else
                 "then wgrad; no dgrad (x gets no gradient: the first layer)")
        read = ("(drelu + dBN) reads the saved statistics, the conv output and the 1-bit ReLU mask" if relu else
                "(dBN) reads the saved statistics and the conv output")
        if not relu and masked_gradient(grad) is not None:
            read += (", and dY and the 1-bit mask of the residual relu above it, so that its d(skip) = dY * mask "
                     "is never written")
        return (f"fused CBR backward of {_FORMS[self.form]}, conv {tuple(x.shape)} * {tuple(w.shape)}: stage 1 "
                f"{read} from {source}; {dgrad}")

    def declined(self, node):
        """For a training batch_norm the per-op rules take: why no form of the pattern did (asked of
        the broadest form only, so that it is said once)."""
        if self.form != "bn" or not (isinstance(node, Expr) and node.op == "batch_norm" and node.attrs.training):
            return None
        x = node.args[0]
        what = f"batch_norm over {tuple(node.shape)} {node.dtype.name} in training: per-op rules (batch statistics " \
               f"recomputed from its input), as "
        if node.dtype == np.float64:
            return what + ("the activations are float64: the per-op rules keep float64 precision, where the fused "
                           "backward's saved statistics are float32")
        if not (isinstance(x, Expr) and x.op == "conv2d"):
            made = x.op if isinstance(x, Expr) else "a tensor"
            return what + f"its input is {made}, not conv2d(...) itself (a conv with a bias, or a cast between them)"
        return what + "its conv2d was evaluated on its own"

    def __repr__(self):
        return f"CbrBackward({self.form!r})"


_FORMS = {"relu": "relu(batch_norm(conv2d(x, w)))", "residual": "relu(batch_norm(conv2d(x, w)) + skip)",
          "bn": "batch_norm(conv2d(x, w))"}


# The residual form first: relu(bn + skip) is not relu(bn), but both start at a relu.
BACKWARD_PATTERNS.extend((CbrBackward("residual"), CbrBackward("relu"), CbrBackward("bn")))
