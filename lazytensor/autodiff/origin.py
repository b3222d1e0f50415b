"""An evaluated expression as it was computed, for gradients: lazytensor.core.expr.as_computed."""
from lazytensor.core.expr import as_computed  # noqa: F401
