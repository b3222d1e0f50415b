"""Reverse-mode automatic differentiation: gradient rules by op and the reverse pass, expression DAG -> expression DAG."""
# Each rules_* module registers its ops' rules in rules.GRADIENTS when imported.
from lazytensor.autodiff import rules_conv_bn  # noqa: F401  (conv2d, batch_norm and the backward convolutions)
from lazytensor.autodiff import rules_nn  # noqa: F401  (matmul and pooling)
