"""Reverse-mode automatic differentiation: gradient rules by op and the reverse pass, expression DAG -> expression DAG.

Importing the package registers every rules_*.py module's rules in lazytensor.autodiff.rules.GRADIENTS.
"""
from lazytensor.autodiff import rules, rules_reductions, rules_views  # noqa: F401  (register their rules)
from lazytensor.autodiff.reverse import Gradients, grad

__all__ = ["Gradients", "grad"]
