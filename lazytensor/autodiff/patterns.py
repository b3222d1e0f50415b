"""Backward patterns: whole subgraphs whose gradients are computed together, tried before the
per-op rules (lazytensor.autodiff.rules).

Design: docs/design/autodiff.md, section "lazytensor/autodiff/patterns.py".
"""
BACKWARD_PATTERNS: list = []


def matching_pattern(node):
    """The first pattern that takes `node`, or None."""
    for pattern in BACKWARD_PATTERNS:
        if pattern.match(node):
            return pattern
    return None


def declined(node):
    """Why no pattern took `node`, where a pattern says (else None)."""
    for pattern in BACKWARD_PATTERNS:
        why = getattr(pattern, "declined", lambda n: None)(node)
        if why is not None:
            return why
    return None
