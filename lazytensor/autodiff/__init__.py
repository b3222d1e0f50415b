"""Reverse-mode automatic differentiation: gradient rules by op and the reverse pass, expression DAG -> expression DAG."""
from lazytensor.autodiff import rules_conv_bn  # noqa: F401,E402  (registers the conv2d and batch_norm rules)
from lazytensor.autodiff import patterns_cbr  # noqa: F401,E402  (registers the fused CBR backward patterns)
