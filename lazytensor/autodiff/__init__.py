"""Reverse-mode automatic differentiation: gradient rules by op and the reverse pass, expression DAG -> expression DAG."""

from lazytensor.autodiff import rules_nn  # noqa: E402,F401  (registers the matmul and pooling rules)
