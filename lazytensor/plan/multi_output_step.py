"""The step of a plan for several results: one generated kernel writing several outputs of one
iteration space (lazytensor.plan.several plans it)."""
from __future__ import annotations

from lazytensor.kernels.program import describe, output_name
from lazytensor.plan.steps import FusedElementwise, _indent


class MultiOutputElementwise(FusedElementwise):
    """One kernel: reads `reads` and writes `outs` (out, out1, out2, ... of the program) at each
    element of their common shape. The backends take the further outputs as array operands after
    the inputs, so this is a FusedElementwise whose `inputs` are reads + outs[1:].
    labels: what each output is, for explain ("output 2", "a temporary for output 0")."""
    __slots__ = ("outs", "reads", "labels")

    def __init__(self, backend, program, outs, reads, scalars, labels, note=""):
        super().__init__(backend, program, outs[0], [*reads, *outs[1:]], scalars, note=note)
        self.outs = outs
        self.reads = reads
        self.labels = labels

    def describe(self, source: bool = True) -> str:
        writes = ", ".join(f"{output_name(k)} = {label}" for k, label in enumerate(self.labels))
        head = (f"FusedElementwise with {len(self.outs)} output{'s' if len(self.outs) > 1 else ''} on {self.backend.name}: "
                f"{len(self.program.instrs)} values ({shared_values(self.program)} shared by several outputs, "
                f"computed once), "
                f"{len(self.reads)} array inputs, {len(self.scalars)} scalar arguments, "
                f"{self.out.size} elements of shape {self.out.shape}\n  writes {writes}")
        if self.note:
            head += f"\n  note: {self.note}"
        text = head + "\n" + _indent(describe(self.program))
        if source:
            text += "\n" + _indent(self.backend.explain_elementwise(self.program, self.out, self.inputs))
        return text


def shared_values(program) -> int:
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
