"""The steps of a plan as lt.explain prints them: each step in full for a short plan (or detail=True),
else one line per kind of step with its count, so that a long plan (a training step) reads in a screen."""
from __future__ import annotations

SUMMARY_OVER = 20       # plans of more steps print their kinds unless detail=True


def summarized(steps, detail=None) -> bool:
    """Whether lt.explain prints `steps` by kind: detail=None decides by the plan's length."""
    return len(steps) > SUMMARY_OVER if detail is None else not detail


def step_lines(steps, source: bool = True, detail=None) -> list:
    """The lines lt.explain prints for `steps`: "[i] " and each step's description, or the summary."""
    if summarized(steps, detail):
        return summary_lines(steps)
    return [f"[{i}] " + step.describe(source=source) for i, step in enumerate(steps, 1)]


def summary_lines(steps) -> list:
    kinds: dict = {}
    for step in steps:
        kinds[step_kind(step)] = kinds.get(step_kind(step), 0) + 1
    lines = [f"steps by kind ({len(steps)} steps of {len(kinds)} kinds; detail=True or lt.explain(..., \"full\") "
             f"lists each step):"]
    # most frequent first; equal counts in the order the plan first runs them
    lines += [f"  {kind}: {n}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1])]
    return lines


def step_kind(step) -> str:
    """The step's class, and the backend it runs on where it has one."""
    backend = getattr(step, "backend", None)      # (a step that launches nothing has none)
    return type(step).__name__ + ("" if backend is None else f" on {backend.name}")


def counted(items) -> list:
    """(item, count) in the order items first appear: repeated lines printed once with their count."""
    counts: dict = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return list(counts.items())
