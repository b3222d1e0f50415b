"""`y[...] = e` for an elementwise `e` over flat operands: the planner's one step, without the planner.

Design: docs/design/plans.md, section "lazytensor/assign/direct.py".
"""
from __future__ import annotations

import os

from lazytensor.core.expr import RESULTS, Expr
from lazytensor.core.memory import owner
from lazytensor.core.readers import Memory
from lazytensor.core.tensor import Tensor
from lazytensor.kernels import launch_log, tier
from lazytensor.kernels.backend import backend_for
from lazytensor.plan import steps
from lazytensor.plan.lower import tree_program

try:        # `y[...] = e` of the structures a flat runner's loops serve, in C
    from lazytensor.assign import _direct_path
except ImportError:
    _direct_path = None


def flat_of(t) -> tuple:
    """(id of the owner of t's allocation, whether t's array is C-contiguous and aligned) of a Tensor,
    read once and kept on it: a Tensor never changes the memory it views. (The CPU backend calls a
    kernel's compiled entry for aligned C-contiguous arrays without numba's type checks.)"""
    flat = t.flat
    if flat is None:
        a = t.data
        flags = a.flags
        aligned = getattr(flags, "aligned", True)          # (CuPy's flags have no such field)
        flat = t.flat = (id(owner(a)), bool(flags.c_contiguous and aligned))
    return flat


# Expr.last_plan of a node assigned once on the direct path of a binding backend, without a step:
# no destination's memory is None, so the planner's memo never matches it.
ASSIGNED_ONCE = (None, ())

# (structure id, the destination dtype's load id, device) -> (program, backend): what a known
# expression's direct assignment launches, found in one lookup of small ints and a string.
_known: dict = {}


def assign(node, dest):
    """dest[...] = node on the direct path; None, with nothing done, where the conditions above do
    not hold. The caller has checked node's dtype, shape and device against dest's, and that dest is
    writable; node is an unevaluated elementwise Expr. Returns the steps that ran, for the node to
    keep as its plan into dest (Expr.last_plan): none on the CPU, where the direct path is as cheap
    as a kept step; the step itself on a backend that binds a step's launch (CUDA: a kept step
    launches with the arguments it bound on its first run), from the node's second assignment on:
    its first launches without a step and marks the node (ASSIGNED_ONCE)."""
    arrays = flat_operands(node, dest)
    if type(arrays) is str or steps.before_step is not None:
        return None                 # (a test's hook into every step: the planned path calls it)
    key = (node.skey, dest.skey, dest.device)
    known = _known.get(key)
    if known is None:
        if len(_known) > 4096:
            _known.clear()
        known = _known[key] = (tree_program(node, dest.dtype), backend_for(dest.device))
    program, backend = known
    binds = backend.bind_elementwise is not None
    if not binds or node.last_plan is None:
        # On a backend that binds, a node's first assignment launches without a step: most are
        # built for one assignment (`y[...] = f(x)` in a loop), and binding a step's launch costs
        # more than the launch's own preparation. The second assignment of the same node binds the
        # step, which it then keeps.
        by_loops = backend.run_flat(program, dest.data, arrays, node.scalars)
        if binds:
            node.last_plan = ASSIGNED_ONCE
        elif by_loops and _direct_path is not None:
            entry = backend.loops_entry(program, dest.data)
            if entry is not None:
                _direct_path.keep(node.skey, dest.skey, dest.shape, (key, known, *entry))
        return ()
    step = steps.FusedElementwise(backend, program, dest.data, arrays, list(node.scalars))
    step.run()
    return [step]


def direct_refusal(node, dest):
    """None where `dest[...] = node` takes the direct path, else why not (for lt.explain)."""
    arrays = flat_operands(node, dest)
    return arrays if type(arrays) is str else None


def flat_operands(node, dest):
    """The arrays of node's tensors, in leaf order, where `dest[...] = node` takes the direct path;
    else why not, a str. A handful of comparisons per tensor: this runs on every assignment."""
    if node.shared:
        return "a node is used twice (the program is found by a walk of the DAG)"
    shape = dest.shape
    if node.shape != shape:
        return "the expression broadcasts to the destination"
    own, contiguous = dest.flat or flat_of(dest)
    if not contiguous:
        return "the destination is not C-contiguous"
    leaves = node.leaves
    data = dest.data
    arrays = []
    for t in leaves:
        t_shape = t.shape
        if t_shape is not shape and t_shape != shape:
            return "a tensor is broadcast"
        t_own, contiguous = t.flat or flat_of(t)
        if not contiguous:
            return "a tensor is not C-contiguous (or not aligned)"
        a = t.data
        if t_own == own and a is not data:
            return "a tensor shares memory with the destination"
        arrays.append(a)
    n = len(leaves)
    if n > 1 and (leaves[0] is leaves[1] if n == 2 else len(set(leaves)) != n):
        return "a tensor is read twice (the program is found by a walk of the DAG)"
    return arrays


def c_setitem(setitem):
    """Tensor.__setitem__: `setitem`, behind the C path of the structures kept above (where the
    extension is compiled and this Python has the environment's data dict tier.tier_marks reads)."""
    keys = getattr(tier, "_MARK_KEYS", None)
    if _direct_path is None or keys is None or os.environ.get("LAZYTENSOR_PYTHON_NODES", "") not in ("", "0"):
        return setitem
    _direct_path.setup(Expr, Tensor, Memory, RESULTS, _known, vars(steps), vars(launch_log), tier._data, keys, "cpu")
    return _direct_path.Setitem(setitem)
