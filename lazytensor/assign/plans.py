"""The plan of an assignment `out[...] = root`: the planner's (lazytensor.plan.planner), kept as a
recipe (lazytensor.reuse.recipes) where the expression is heavy, so that a later assignment of the
same structure rebinds it instead of planning, or on CUDA replays it as one graph."""
from __future__ import annotations

from lazytensor.plan.heavy import matmul_epilogue
from lazytensor.plan.planner import cheap_plan, heavy_plan
from lazytensor.reuse import recipes


def planned(root, out, backend, replay=False) -> list:
    """Steps that evaluate `root` into the array `out` (already checked for shape, dtype, device).
    replay: a rebound plan over addresses seen before may come back as one CUDA graph step."""
    steps = cheap_plan(root, out, backend)
    if steps is not None:
        return steps
    return recipes.planned(root, out, backend, heavy_plan, replay)


def set_matmul_epilogue_mode(mode: str) -> None:
    """"measure", "on" or "off" from now on (as LAZYTENSOR_MATMUL_EPILOGUE,
    lazytensor.plan.heavy.matmul_epilogue): plans kept as recipes hold the earlier choice, so they
    are dropped and made again."""
    if mode not in ("measure", "on", "off"):
        raise ValueError(f"the matmul epilogue mode is 'measure', 'on' or 'off'; got {mode!r}")
    recipes.clear()
    matmul_epilogue.MODE = mode
