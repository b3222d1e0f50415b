"""The planner: one pass over an expression that returns the list of steps that will run.

`lt.explain` prints exactly this list. A purely elementwise expression is one FusedElementwise
step. Heavy nodes (reductions, materialized views, convolutions) are cut out of the DAG: each
becomes a step of its own whose result is a temporary tensor, and the elementwise work above
them still fuses into one final kernel. HEAVY declares, per heavy op, how its step is built.

When the destination is also read through a different index map (an overlapping view),
the expression is evaluated into a temporary first, as NumPy's "right side first" semantics need.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.expr import Expr
from lazytensor.kernels.program import program_for
from lazytensor.plan.lower import lower
from lazytensor.plan.heavy.matmul_epilogue import available, epilogue_sites
from lazytensor.plan.steps import FusedElementwise, FusedReduction
from lazytensor.reuse import recipes
from lazytensor.plan.shared_values import shared_wide_values
from lazytensor.core.memory import address as _address, may_overlap, owner
from lazytensor.core import tensor as _tensor


# -- aliasing ---------------------------------------------------------------------------------------

def aliased(out, inputs) -> bool:
    """True when an input shares memory with `out` but is read through another index map."""
    ob = None
    for a in inputs:
        if a is out:
            continue
        if ob is None:
            ob = owner(out)
        # (a NumPy array without a base owns itself; a CuPy array's owner is its allocation)
        if (a if type(a) is np.ndarray and a.base is None else owner(a)) is not ob:
            continue
        if a.shape == out.shape and a.strides == out.strides and _address(a) == _address(out):
            continue
        if may_overlap(a, out):
            return True
    return False


# -- heavy nodes -----------------------------------------------------------------------------------
# A builder turns one heavy node into steps: builder(node, backend, cut, out) -> (steps, replacement).
# `cut(a)` returns operand `a` with its own heavy parts already planned; `replacement` is what the
# node becomes in the expression above it: a Tensor holding its result, or an elementwise
# expression over such tensors that fuses into the next kernel. `out` is the destination array
# when the node is the root of the plan and its builder may write there directly, else None.

def _build_reduce(node, backend, cut, out):
    x = cut(node.args[0])
    kept = evaluated_tensor(cut, x)
    if kept is not None:                    # evaluated for another step already: read it
        x = kept
    spec = node.attrs
    program, inputs, scalars = lower(x, x.dtype)
    result = out if out is not None else backend.empty(spec.out_shape, spec.out_dtype)
    return [FusedReduction(backend, program, spec, result, inputs, scalars)], _tensor.Tensor(result, node.device)


def _build_materialize(node, backend, cut, out):
    from lazytensor.core.view_steps import NoViewPossible, apply_step
    x = cut(node.args[0])
    step, why = node.attrs
    kept = evaluated_tensor(cut, x)
    if node.args[0].heavy and isinstance(kept, _tensor.Tensor):
        try:    # the heavy operand already ran into a temporary of its own: view it, no copy
            return [], _tensor.Tensor(apply_step(kept.data, step), node.device)
        except NoViewPossible:
            pass
    tmp = backend.empty(x.shape, x.dtype)
    steps = plan(x, tmp, backend)
    steps[-1].note = f"materialized into a temporary for a view: {why}"
    keep_evaluated(cut, x, tmp, steps[-1])
    return steps, _tensor.Tensor(apply_step(tmp, step), node.device)


def materialized(node, backend, steps, cut=None) -> "_tensor.Tensor":
    """`node` (already cut: no heavy parts) as a Tensor, evaluating it into a temporary if needed.
    cut: the plan's cutter, which keeps what was evaluated so that an expression several heavy
    nodes read (a gradient both matmuls of a layer's backward read, an activation the forward's
    matmul and a weight gradient's transposed view read) is evaluated once."""
    kept = evaluated_tensor(cut, node)
    if isinstance(kept, _tensor.Tensor):
        return kept
    tmp = backend.empty(tuple(node.shape), node.dtype)
    new_steps = plan(node, tmp, backend)
    steps.extend(new_steps)
    keep_evaluated(cut, node, tmp, new_steps[-1])
    return _tensor.Tensor(tmp, node.device)


def evaluated_tensor(cut, node):
    """`node` itself when it is a Tensor, the Tensor the plan evaluated it into, or None."""
    if isinstance(node, _tensor.Tensor):
        return node
    kept = getattr(cut, "evaluated", {}).get(id(node))
    return None if kept is None else kept[1]


def evaluating_step(cut, node):
    """The step that evaluated `node` into its temporary in this plan (see evaluated_tensor), or None."""
    kept = getattr(cut, "evaluated", {}).get(id(node))
    return None if kept is None else kept[2]


def keep_evaluated(cut, node, array, step) -> None:
    evaluated = getattr(cut, "evaluated", None)
    if evaluated is not None:       # the node is kept too: its id stays its own
        evaluated[id(node)] = (node, _tensor.Tensor(array, node.device), step)


HEAVY = {"reduce": _build_reduce, "materialize": _build_materialize}
ROOT_WRITERS = {"reduce"}   # heavy ops whose step can write the plan's destination directly
# Whole-plan patterns, tried on the root first: (name, match(root, out, backend) -> steps or None).
PATTERNS: list = []


def cutter(steps, backend, roots=()):
    """A `cut` function that appends the steps of heavy nodes to `steps`. Steps a builder wants
    to run only after everything else (committing running statistics) go to `cut.deferred`:
    a step that fails before them leaves the user's state untouched.
    roots: the plan's expressions, when given: an elementwise value that several steps' kernels
    read and that reads many arrays is evaluated once (lazytensor.plan.shared_values)."""
    return _Cut(steps, backend, roots)


class _Cut:
    """cutter's function: an object rather than a closure, which would refer to itself through
    its recursion, a cycle that kept the nodes it made (readers of the plan's tensors, see
    lazytensor.core.readers) alive until the garbage collector ran."""

    def __init__(self, steps, backend, roots=()):
        self.steps, self.backend = steps, backend
        self.memo: dict = {}
        self.deferred: list = []
        self.evaluated: dict = {}       # id(cut node) -> (node, the Tensor a step evaluated it into, that step)
        # id(heavy node) -> {name: Tensor}: what a node's steps write beside its value (a training
        # batch_norm's saved statistics, a relu's 1-bit mask), read by the nodes that stand for them
        # (lazytensor.plan.conv.forward_saved)
        self.side: dict = {}
        # id(node) -> why it is evaluated once, or None for the nodes above such a value
        self.once = shared_wide_values(roots, HEAVY) if roots else {}

    def __call__(self, node):
        """`node` with every heavy subtree replaced by what its builder returns, and every value
        chosen to be evaluated once replaced by its temporary."""
        if not node.heavy and id(node) not in self.once:
            return node
        memo = self.memo
        hit = memo.get(id(node))
        if hit is not None:
            return hit
        build = HEAVY.get(node.op)
        if build is not None:
            new_steps, out = build(node, self.backend, self, None)
            self.steps.extend(new_steps)
        else:
            args = tuple(self(a) for a in node.args)
            hit = memo.get(id(node))    # an operand's builder took this node too (a matmul's epilogue)
            if hit is not None:
                return hit
            out = Expr(node.op, args, node.shape, node.dtype, node.device, False, node.attrs)
            why = self.once.get(id(node))
            if why is not None:
                first = len(self.steps)
                value = out
                out = materialized(value, self.backend, self.steps, self)
                for step in self.steps[first:]:
                    step.note = why
                # The temporary is what later builders see of this node: it keeps its writer (a relu's
                # writer takes the 1-bit mask a fused backward reads, lazytensor.plan.conv.forward_saved).
                self.evaluated[id(out)] = (out, out, evaluating_step(self, value))
        memo[id(node)] = out
        return out


# -- the plan ---------------------------------------------------------------------------------------

def copy_step(backend, src, out, note) -> FusedElementwise:
    """out[...] = src as one kernel (strides and broadcasting in its indexing)."""
    program = program_for((("load", src.dtype, 0),), 1, (), out.dtype)
    return FusedElementwise(backend, program, out, [src], [], note=note)


def elementwise_steps(root, out, backend) -> list:
    """The steps of `out[...] = root` for an expression with no heavy part: one kernel (two where the
    destination is read through another index map)."""
    program, inputs, scalars = lower(root, out.dtype)
    if not aliased(out, inputs):
        return [FusedElementwise(backend, program, out, inputs, scalars)]
    tmp = backend.empty(out.shape, out.dtype)
    return [FusedElementwise(backend, program, tmp, inputs, scalars,
                             note="the destination is read through another index map: evaluated into a temporary"),
            copy_step(backend, tmp, out, "copy the temporary into the destination")]


def plan(root, out, backend, replay=False) -> list:
    """Steps that evaluate `root` into the array `out` (already checked for shape, dtype, device).
    A heavy expression is planned once per structure (lazytensor.reuse.recipes) and rebound after;
    replay: a rebound plan over addresses seen before may come back as one CUDA graph step."""
    if not root.heavy:
        return elementwise_steps(root, out, backend)
    if root.op == "reduce" and not root.args[0].heavy and not backend.graphs:
        steps = _root_reduction(root, out, backend)
        if steps is not None:
            return steps
    return recipes.planned(root, out, backend, _heavy, replay)


def _root_reduction(root, out, backend):
    """A reduction of an elementwise expression written straight into the destination: one step,
    made directly (two dict lookups: the program by structure id, the spec is the node's), as a
    recipe would rebind it, but without its signature walk: `float(x.sum())` on small arrays is
    this path. On backends with graphs the recipe stays (it may replay). None: the general path."""
    if root.dtype != out.dtype or root.shape != out.shape:
        return None
    for _, match in PATTERNS:       # a whole-plan pattern that takes a reduction comes first, as in _heavy
        steps = match(root, out, backend)
        if steps is not None:
            return steps
    spec = root.attrs
    x = root.args[0]
    program, inputs, scalars = lower(x, x.dtype)
    if aliased(out, inputs):
        return None
    return [FusedReduction(backend, program, spec, out, inputs, scalars)]


def _heavy(root, out, backend) -> list:
    for _, match in PATTERNS:
        steps = match(root, out, backend)
        if steps is not None:
            return steps
    steps: list = []
    cut = cutter(steps, backend, (root,))
    if available(backend):              # cuBLASLt epilogues: relu(a @ b + bias) (written into out), bias gradients
        cut.epilogues, cut.bgrads, cut.bgrad_first = epilogue_sites([root])
        cut.root_out = (root, out)
    if root.op in ROOT_WRITERS and root.dtype == out.dtype and tuple(root.shape) == out.shape:
        args = [cut(a) for a in root.args]
        inputs = [leaf.data for a in args for leaf in a.leaves]
        if not aliased(out, inputs):
            new_steps, _ = HEAVY[root.op](root, backend, cut, out)
            return steps + new_steps + cut.deferred
    top = cut(root)
    if isinstance(top, _tensor.Tensor) and top.data is out:     # a step wrote the destination itself
        return steps + cut.deferred
    final = elementwise_steps(top, out, backend)
    return steps + final + cut.deferred
