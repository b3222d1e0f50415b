"""Reverse-mode automatic differentiation: gradient rules by op and the reverse pass, expression DAG -> expression DAG.

Importing the package registers every rules_*.py module's rules in lazytensor.autodiff.rules.GRADIENTS,
and the fused backward patterns (patterns_*.py) in lazytensor.autodiff.patterns.BACKWARD_PATTERNS.
"""
from lazytensor.autodiff import rules, rules_math, rules_reductions, rules_views  # noqa: F401  (register their rules)
from lazytensor.autodiff import rules_conv_bn  # noqa: F401  (conv2d, batch_norm and the backward convolutions)
from lazytensor.autodiff import rules_nn  # noqa: F401  (matmul and pooling)
from lazytensor.autodiff import rules_linalg  # noqa: F401  (inv, solve, det, cholesky, ...)
from lazytensor.autodiff import rules_gathers, rules_joining, rules_scans  # noqa: F401  (x[mask], concatenate, cumsum)
from lazytensor.autodiff import rules_collectives  # noqa: F401  (all_reduce)
from lazytensor.autodiff import patterns_cbr  # noqa: F401  (the fused CBR backward)
from lazytensor.autodiff.reverse import Gradients, grad

__all__ = ["Gradients", "grad"]
