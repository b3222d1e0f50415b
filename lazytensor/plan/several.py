"""Several results at once: the plan for a list of (destination array, expression) pairs.

All reads happen before any write (simultaneous assignment), so `[(a, b), (b, a)]` swaps:
1. The heavy parts of every expression are cut out by ONE cutter, so a reduction (or any heavy node)
   that several expressions share runs once. Those steps only read the user's tensors and write
   temporaries, and they all run first.
2. The remaining elementwise expressions are grouped by iteration space (the destination's shape):
   each group is ONE kernel with an output per destination, in which a value several outputs use
   is computed once per element. Groups of different shapes are different kernels.
3. A kernel loads every operand of an element before it stores any output of that element, so an
   output may overwrite a tensor read at the same index (in-place stays one kernel). A destination
   that its own kernel reads through another index map (an overlapping view), or that another
   kernel reads at all, is written to a temporary instead and copied into place after every
   kernel ran.
"""
from __future__ import annotations

from lazytensor.core.memory import may_overlap
from lazytensor.plan.lower import lower_many
from lazytensor.plan.multi_output_step import MultiOutputElementwise
from lazytensor.plan.planner import aliased, copy_step, cutter


def check_disjoint(outs) -> None:
    """Two destinations sharing memory would be written in no defined order: an error."""
    for i, a in enumerate(outs):
        for j in range(i):
            if a.size and outs[j].size and may_overlap(a, outs[j]):
                raise ValueError(f"destinations {j} and {i} share memory: several results written at once need "
                                 f"distinct destinations (assign one after the other, or evaluate into new tensors)")


def plan_several(pairs, backend) -> list:
    """Steps that evaluate every expression of `pairs` ((destination array, expression), already
    checked for shape, dtype and device, all on `backend`) as one simultaneous assignment."""
    outs = [out for out, _ in pairs]
    check_disjoint(outs)
    steps: list = []
    cut = cutter(steps, backend)
    for node, users in _shared_heavy_nodes([node for _, node in pairs]):
        first = len(steps)
        cut(node)                                     # one memo: a shared heavy node runs once
        for step in steps[first:]:
            if hasattr(step, "note"):
                step.note = "; ".join(filter(None, [step.note, f"shared by results {_listed(users)}: runs once"]))
    roots = [cut(node) for _, node in pairs]

    groups: dict = {}                                 # iteration space -> indices of its outputs
    for i, out in enumerate(outs):
        groups.setdefault(tuple(out.shape), []).append(i)
    lowered = {shape: lower_many([roots[i] for i in members], [outs[i].dtype for i in members])
               for shape, members in groups.items()}

    kernels, copies = [], []
    for shape, members in groups.items():
        program, inputs, scalars = lowered[shape]
        others = [a for other, (_, ins, _) in lowered.items() if other != shape for a in ins]
        targets, labels = [], []
        for i in members:
            out = outs[i]
            why = _needs_temporary(out, inputs, others)
            if why is None:
                targets.append(out)
                labels.append(f"result {i}")
                continue
            tmp = backend.empty(out.shape, out.dtype)
            targets.append(tmp)
            labels.append(f"a temporary for result {i} ({why})")
            copies.append(copy_step(backend, tmp, out, f"copy the temporary into result {i}"))
        note = "" if len(groups) == 1 else (f"iteration space {shape}: {len(groups)} shapes among the results, "
                                           f"one kernel per shape")
        kernels.append(MultiOutputElementwise(backend, program, targets, inputs, scalars, labels,
                                              _shared_values(program), note))
    return steps + kernels + copies + cut.deferred


def _shared_heavy_nodes(roots) -> list:
    """[(node, indices of the roots that use it)] for the heavy nodes below two or more roots,
    operands before their users (only heavy nodes are walked: the flag marks the way to them)."""
    users: dict = {}
    order: list = []
    for k, root in enumerate(roots):
        seen = set()
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            if not node.heavy or id(node) in seen and not done:
                continue
            if done:
                if id(node) not in users:
                    users[id(node)] = []
                    order.append(node)
                users[id(node)].append(k)
                continue
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((a, False) for a in node.args)
    return [(node, users[id(node)]) for node in order if len(users[id(node)]) > 1]


def _listed(indices) -> str:
    return ", ".join(str(i) for i in indices[:-1]) + f" and {indices[-1]}"


def _needs_temporary(out, inputs, other_inputs):
    if aliased(out, inputs):
        return "its kernel reads it through another index map"
    for a in other_inputs:
        if may_overlap(a, out):
            return "a kernel for results of another shape reads it"
    return None


def _shared_values(program) -> int:
    """How many computed values (not loads or scalars) two or more outputs depend on."""
    stores = program.stores()
    if len(stores) < 2:
        return 0
    users = [0] * len(program.instrs)
    for vid, _ in dict.fromkeys(stores):
        seen = set()
        stack = [vid]
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            users[v] += 1
            op, _, *args = program.instrs[v]
            if op not in ("load", "scalar"):
                stack.extend(args)
    return sum(1 for v, n in enumerate(users) if n > 1 and program.instrs[v][0] not in ("load", "scalar"))


