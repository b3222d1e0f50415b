"""Several results at once: the plan for a list of (destination array, expression) pairs.

Design: docs/design/plans.md, section "lazytensor/plan/several.py".
"""
from __future__ import annotations

from lazytensor.core import tensor as _tensor
from lazytensor.core.memory import may_overlap, owner
from lazytensor.plan.lower import lower_many
from lazytensor.plan.heavy.matmul_epilogue import available, epilogue_sites
from lazytensor.plan.multi_output_step import MultiOutputElementwise
from lazytensor.plan.elementwise import aliased, copy_step
from lazytensor.plan.evaluated import evaluated_tensor
from lazytensor.plan.heavy.table import PATTERNS, ROOT_WRITERS
from lazytensor.plan.planner import build_heavy, cutter


def check_disjoint(outs) -> None:
    """Two destinations sharing memory would be written in no defined order: an error."""
    owners = [owner(a) for a in outs]
    for i, a in enumerate(outs):
        for j in range(i):
            if owners[i] is owners[j] and a.size and outs[j].size and may_overlap(a, outs[j]):
                raise ValueError(f"destinations {j} and {i} share memory: several results written at once need "
                                 f"distinct destinations (assign one after the other, or evaluate into new tensors)")


def plan_several(pairs, backend) -> list:
    """Steps that evaluate every expression of `pairs` ((destination array, expression), already
    checked for shape, dtype and device, all on `backend`) as one simultaneous assignment."""
    outs = [out for out, _ in pairs]
    check_disjoint(outs)
    shared = _shared_heavy_nodes([node for _, node in pairs])
    patterned, pairs = _whole_plan_patterns(pairs, backend, shared)
    steps: list = []
    cut = cutter(steps, backend, [node for out, node in pairs if out is not None])
    if available(backend):              # cuBLASLt epilogues (plan.matmul_epilogue): relu(a @ b + bias), bias gradients
        cut.epilogues, cut.bgrads, cut.bgrad_first = epilogue_sites([node for _, node in pairs])
    # A matmul read through a shared view (a weight gradient's transpose) is planned by that view's
    # builder, which may compute the product transposed, as it is read (lazytensor.plan.heavy.matmul).
    viewed = {id(n.args[0]) for n, _ in shared if n.op == "materialize" and getattr(n.args[0], "op", None) == "matmul"}
    # A region's gradients first: its builder has each weight gradient's step write its segment, which
    # it cannot once that gradient was planned into a temporary of its own (lazytensor.plan.heavy.region_write).
    shared.sort(key=lambda pair: pair[0].op != "region_write")
    for node, users in shared:
        if id(node) in viewed:
            continue
        first = len(steps)
        cut(node)                                     # one memo: a shared heavy node runs once
        for step in steps[first:]:
            _add_note(step, f"shared by results {_listed(users)}: runs once")
    writers = _root_writer_candidates(pairs, {id(node) for node, _ in shared})
    # The other results are cut first: a root writer (a reduction) may then read what their steps evaluated.
    roots = [None if out is None or i in writers else cut(node) for i, (out, node) in enumerate(pairs)]
    pairs = _root_writers(pairs, backend, cut, steps, writers)
    for i in writers:
        if pairs[i][0] is not None:         # it reads its destination through another index map
            roots[i] = cut(pairs[i][1])
    for i, root in enumerate(roots):        # a root a step evaluated already: its kernel reads that value
        kept = None if root is None else evaluated_tensor(cut, root)
        if kept is not None:
            roots[i] = kept

    groups: dict = {}                                 # iteration space -> indices of its outputs
    for i, (out, _) in enumerate(pairs):
        if out is not None:                           # None: planned already (a pattern, a root writer)
            groups.setdefault(tuple(out.shape), []).append(i)
    lowered = {shape: lower_many([roots[i] for i in members], [outs[i].dtype for i in members])
               for shape, members in groups.items()}

    kernels, copies = [], []
    for shape, later in _kernel_order(groups, lowered, outs):
        members = groups[shape]
        program, inputs, scalars = lowered[shape]
        others = [a for other in later for a in lowered[other][1]]
        targets, labels = [], []
        for k, i in enumerate(members):
            out = outs[i]
            why = _needs_temporary(out, inputs, others, _loads_of(program, program.stores()[k][0]))
            if why is None:
                targets.append(out)
                labels.append(f"result {i}")
                continue
            tmp = backend.empty(out.shape, out.dtype)
            targets.append(tmp)
            labels.append(f"a temporary for result {i} ({why})")
            copies.append(copy_step(backend, tmp, out, f"copy the temporary into result {i}"))
        note = "" if len(groups) == 1 else (f"iteration space {shape}: {len(groups)} shapes among the results, "
                                           f"one kernel per shape, each run before those writing what it reads")
        kernels.append(MultiOutputElementwise(backend, program, targets, inputs, scalars, labels, note))
    return patterned.before + steps + kernels + copies + patterned.after + cut.deferred


def _loads_of(program, vid) -> set:
    """The input indices value `vid` of `program` is computed from."""
    loads, seen, stack = set(), set(), [vid]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        op, _, *args = program.instrs[v]
        if op == "load":
            loads.add(args[0])
        elif op != "scalar":
            stack.extend(args)
    return loads


def _kernel_order(groups, lowered, outs) -> list:
    """[(shape, the shapes whose kernels run after it and still read its destinations)]: a kernel
    runs only when no kernel still to run reads what it writes, so that cross-shape reads need no
    temporary. Kernels reading each other's destinations (a cycle) run last, in their first order,
    and their `later` readers make those destinations temporaries."""
    def reads(reader, writer) -> bool:
        ins = lowered[reader][1]
        return any(owner(a) is owner(outs[i]) and may_overlap(a, outs[i]) for i in groups[writer] for a in ins)

    remaining = list(groups)
    if len(remaining) == 1:
        return [(remaining[0], [])]
    order = []
    while remaining:
        ready = next((g for g in remaining if not any(h != g and reads(h, g) for h in remaining)), None)
        if ready is None:
            break
        order.append((ready, []))
        remaining.remove(ready)
    return order + [(g, [h for h in remaining if h != g]) for g in remaining]


class _Patterned:
    """Steps of results planned by a whole-plan pattern (the fused CBR paths): they run first, as
    every step that only reads; `after` copies those written to a temporary into place."""
    def __init__(self):
        self.before, self.after = [], []


def _whole_plan_patterns(pairs, backend, shared):
    """Results whose root matches one of the PATTERNS (lazytensor.plan.heavy.table) are planned by
    it, as `dst[...] = e` would be, unless a heavy node below them is shared with another result (planned once, by the
    common cutter). Such a result is written straight to its destination when no other expression
    reads that memory, else to a temporary copied after every kernel ran.
    -> (_Patterned, pairs with the patterned results' destinations replaced by None)."""
    patterned = _Patterned()
    if not PATTERNS:
        return patterned, pairs
    in_shared = {id(node) for node, _ in shared}
    result = list(pairs)
    for i, (out, node) in enumerate(pairs):
        if not node.heavy or any(id(n) in in_shared for n in _heavy_nodes(node)):
            continue
        others = [a for j, (_, other) in enumerate(pairs) if j != i for a in _arrays_read(other)]
        read = any(may_overlap(a, out) for a in others)
        target = backend.empty(out.shape, out.dtype) if read else out
        for name, match in PATTERNS:
            found = match(node, target, backend, cutter)
            if found is not None:
                break
        else:
            continue
        _add_note(found[0], f"result {i}: {name}" + (" into a temporary (another result reads its destination)"
                                                     if read else ""))
        if read:
            patterned.after.append(copy_step(backend, target, out, f"copy the temporary into result {i}"))
        patterned.before += found
        result[i] = (None, node)
    return patterned, result


def _root_writer_candidates(pairs, shared_ids) -> set:
    """The indices of the results whose root is a heavy node that can write its destination itself
    (a reduction, a convolution: the table's ROOT_WRITERS), when nothing else reads that
    destination and the node is no other result's too."""
    found = set()
    reads: dict = {}                # j -> the arrays result j reads, walked once
    for i, (out, node) in enumerate(pairs):
        if (out is None or getattr(node, "op", None) not in ROOT_WRITERS or id(node) in shared_ids
                or node.dtype != out.dtype or tuple(node.shape) != out.shape):
            continue
        if any(may_overlap(a, out) for j, (_, other) in enumerate(pairs) if j != i
               for a in (reads[j] if j in reads else reads.setdefault(j, _arrays_read(other)))):
            continue
        found.add(i)
    return found


def _root_writers(pairs, backend, cut, steps, candidates) -> list:
    """Each candidate result (_root_writer_candidates) writes its destination itself, as
    `dst[...] = x.sum()` does, unless it reads that destination through another index map; its
    steps go to `steps`. -> pairs with those results' destinations replaced by None."""
    result = list(pairs)
    for i, (out, node) in enumerate(pairs):
        if i not in candidates:
            continue
        args = [cut(a) for a in node.args]
        if aliased(out, [leaf.data for a in args for leaf in a.leaves]):
            continue
        new_steps, _ = build_heavy(node, backend, cut, out)
        if new_steps:                       # (none where an earlier step writes it: d(skip) by the dBN sums)
            _add_note(new_steps[-1], f"writes result {i}")
        steps.extend(new_steps)
        result[i] = (None, node)
    return result


def _heavy_nodes(root):
    """Every heavy node of `root`'s DAG (the flag marks the way to them)."""
    seen, stack = {}, [root]
    while stack:
        node = stack.pop()
        if getattr(node, "heavy", False) and id(node) not in seen:
            seen[id(node)] = node
            stack.extend(node.args)
    return list(seen.values())


def _arrays_read(root) -> list:
    """The arrays of every tensor `root` reads, below heavy nodes too."""
    arrays, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, _tensor.Tensor):
            arrays.append(node.data)
        else:
            stack.extend(getattr(node, "args", ()))
    return arrays


def _shared_heavy_nodes(roots) -> list:
    """[(node, indices of the roots that use it)] for the heavy nodes below two or more roots,
    operands before their users (only heavy nodes are walked: the flag marks the way to them).
    The roots are walked last first: in a training step they are the parameters' updates in
    forward order, so each layer's weight gradient is then planned as soon as the backward has
    reached that layer (the backward's order, as autograd's), not every one after the whole
    backward, which kept each layer's output gradient alive to the end of the step."""
    users: dict = {}
    order: list = []
    for k in reversed(range(len(roots))):
        root = roots[k]
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
    return [(node, sorted(users[id(node)])) for node in order if len(users[id(node)]) > 1]


def _add_note(step, text: str) -> None:
    if hasattr(step, "note"):         # every step that describes itself has one
        step.note = "; ".join(filter(None, [step.note, text]))


def _listed(indices) -> str:
    return ", ".join(str(i) for i in indices[:-1]) + f" and {indices[-1]}"


def _needs_temporary(out, inputs, other_inputs, own_loads):
    """Why output `out` of a kernel reading `inputs` must go through a temporary, or None.
    own_loads: the inputs its own value is computed from. An input at the same index that only
    other outputs use is read in no order with this store: numba's parallel loops assume the
    arrays of a kernel do not overlap and may store first (measured: a swap then copies one way)."""
    if aliased(out, inputs):
        return "its kernel reads it through another index map"
    own = owner(out)
    for j, a in enumerate(inputs):
        if j not in own_loads and owner(a) is own and may_overlap(a, out):
            return "its kernel reads it for another result only, and may store before that read"
    for a in other_inputs:
        if owner(a) is own and may_overlap(a, out):
            return "a kernel for results of another shape, run after it, reads it"
    return None


