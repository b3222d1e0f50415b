"""The planner: one pass over an expression that returns the list of steps that will run.

`lt.explain` prints exactly this list. A purely elementwise expression is one FusedElementwise
step (lazytensor.plan.elementwise). Heavy nodes (reductions, materialized views, convolutions) are
cut out of the DAG: each becomes a step of its own whose result is a temporary tensor, and the
elementwise work above them still fuses into one final kernel. The table of heavy ops
(lazytensor.plan.heavy.table) says, per heavy op, which builders make its steps.
"""
from __future__ import annotations

from lazytensor.core.expr import Expr
from lazytensor.core import tensor as _tensor
from lazytensor.plan.elementwise import aliased, elementwise_steps
from lazytensor.plan.evaluated import evaluating_step, materialized
from lazytensor.plan.heavy.matmul import build_transposed_matmul
from lazytensor.plan.heavy.matmul_epilogue import available, epilogue_sites
from lazytensor.plan.heavy.table import HEAVY, PATTERNS, ROOT_WRITERS
from lazytensor.plan.lower import lower
from lazytensor.plan.shared_values import shared_wide_values
from lazytensor.plan.steps import FusedReduction


def build_heavy(node, backend, cut, out):
    """(steps, replacement) of the heavy `node`: its builders in the table's order, the first that
    does not decline (return None)."""
    for build in HEAVY[node.op]:
        built = build(node, backend, cut, out)
        if built is not None:
            return built
    raise LookupError(f"every builder of {node.op!r} declined the node")


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

    def plan(self, root, out, backend) -> list:
        """The steps of `out[...] = root` inside a builder (a view's temporary, a part's slice)."""
        return plan(root, out, backend)

    def into(self, node, out) -> bool:
        """Plan the heavy `node` to write the array `out` itself, as a root writer writes its
        destination (a weight gradient into its segment of a region), its steps appended; False
        where it cannot (not a root writer nor a weight gradient's transposed product, planned
        already, another shape or dtype, or an operand reading `out` through another index map)."""
        if (not node.heavy or node.op not in ROOT_WRITERS and node.op != "materialize" or id(node) in self.memo
                or node.dtype != out.dtype or tuple(node.shape) != out.shape):
            return False
        if node.op == "materialize":        # (a @ b).T written through out's transposed view, or nothing
            built = build_transposed_matmul(node, self.backend, self, out)
            if built is None:
                return False
            new_steps, value = built
        else:
            args = [self(a) for a in node.args]
            if aliased(out, [leaf.data for a in args for leaf in a.leaves]):
                return False
            new_steps, value = build_heavy(node, self.backend, self, out)
            value = _tensor.Tensor(out, node.device)
        self.steps.extend(new_steps)
        self.memo[id(node)] = value
        return True

    def __call__(self, node):
        """`node` with every heavy subtree replaced by what its builder returns, and every value
        chosen to be evaluated once replaced by its temporary."""
        if not node.heavy and id(node) not in self.once:
            return node
        memo = self.memo
        hit = memo.get(id(node))
        if hit is not None:
            return hit
        if node.op in HEAVY:
            new_steps, out = build_heavy(node, self.backend, self, None)
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

def plan(root, out, backend) -> list:
    """Steps that evaluate `root` into the array `out` (already checked for shape, dtype, device).
    Assignment keeps the plans of heavy expressions as recipes (lazytensor.assign.plans)."""
    steps = cheap_plan(root, out, backend)
    return steps if steps is not None else heavy_plan(root, out, backend)


def cheap_plan(root, out, backend):
    """The plan of an expression that is cheaper to make than a recipe's signature walk, or None:
    an elementwise expression, or a reduction of one written straight into the destination."""
    if not root.heavy:
        return elementwise_steps(root, out, backend)
    if root.op == "reduce" and not root.args[0].heavy and not backend.graphs:
        return _root_reduction(root, out, backend)
    return None


def _root_reduction(root, out, backend):
    """A reduction of an elementwise expression written straight into the destination: one step,
    made directly (two dict lookups: the program by structure id, the spec is the node's), as a
    recipe would rebind it, but without its signature walk: `float(x.sum())` on small arrays is
    this path. On backends with graphs the recipe stays (it may replay). None: the general path."""
    if root.dtype != out.dtype or root.shape != out.shape:
        return None
    for _, match in PATTERNS:       # a whole-plan pattern that takes a reduction comes first, as in heavy_plan
        steps = match(root, out, backend, cutter)
        if steps is not None:
            return steps
    spec = root.attrs
    x = root.args[0]
    program, inputs, scalars = lower(x, x.dtype)
    if aliased(out, inputs):
        return None
    return [FusedReduction(backend, program, spec, out, inputs, scalars)]


def heavy_plan(root, out, backend) -> list:
    """The plan of an expression with heavy parts: a whole-plan pattern, else its heavy nodes cut out."""
    for _, match in PATTERNS:
        steps = match(root, out, backend, cutter)
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
            new_steps, _ = build_heavy(root, backend, cut, out)
            return steps + new_steps + cut.deferred
    top = cut(root)
    if isinstance(top, _tensor.Tensor) and top.data is out:     # a step wrote the destination itself
        return steps + cut.deferred
    final = elementwise_steps(top, out, backend)
    return steps + final + cut.deferred
