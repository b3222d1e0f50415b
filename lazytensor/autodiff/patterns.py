"""Backward patterns: whole subgraphs whose gradients are computed together, tried before the
per-op rules (lazytensor.autodiff.rules).

BACKWARD_PATTERNS holds objects with
    match(node) -> bool
        True when `node` is the root of the pattern AND the pattern can take it now (for the
        fused CBR backward: a training forward whose saved results are complete);
    gradients(node, grad, wanted=None) -> dict
        for the root `node` and the gradient `grad` of its output (a lazy expression of node's
        shape, or broadcastable to it), {operand: gradient} for each Expr or Tensor below the
        root that is an input of the pattern (e.g. x, w, gamma, beta, skip); each gradient is a
        lazy expression of that operand's shape, or None where none flows. wanted (optional): the
        operands whose gradients the reverse pass needs (those that lead to one of lt.grad's
        inputs); a pattern may then leave out the others and say so (the CBR pattern's first
        layer: no dX, and explain notes that no dgrad is planned).
The reverse pass (lazytensor.autodiff.reverse, lt.grad) tries the patterns at each node in
reverse topological order, before the per-op rules; when one matches, it adds the returned
gradients to those operands' and skips the nodes between the root and those operands (the pattern
consumed them). Gradients that are never used are never evaluated, so a pattern may return them
all (the first layer's dX then plans no dgrad). Modules of patterns register themselves when
lazytensor.autodiff is imported (its __init__ imports each patterns_*.py).

For lt.explain, a pattern may also have
    describe(node, grad, wanted) -> str   what gradients() builds for a root it took;
    declined(node) -> str or None         for a node the per-op rules take, why the pattern did not
                                          (the CBR pattern: a training batch_norm it could not take).
The reverse pass keeps both in Gradients.paths.
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
