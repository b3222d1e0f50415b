"""The IR's one way up, resolved at call time.

Tensors and expressions are what users hold, so their methods are the user API: `t.sum()`, `t.T`,
`np.exp(t)`, `y[...] = e`, `np.asarray(e)`, Jupyter's `_repr_html_`. Those build nodes through
lazytensor.ops, evaluate through lazytensor.plan, or display through lazytensor.tools.display,
layers that sit above the IR and import it. Every such method reaches up
through this module alone: an attribute below imports its module on first use and keeps it, so the
core -> ops/plan -> core loop is these few lines, and the import-linter contract in pyproject.toml
names them as its only exception.
"""
from __future__ import annotations


def __getattr__(name: str):
    if name == "views":
        from lazytensor.ops import views as module
    elif name == "reductions":
        from lazytensor.ops import reductions as module
    elif name == "numpy_dispatch":
        from lazytensor.ops import numpy_dispatch as module
    elif name == "matmul":
        from lazytensor.ops import matmul as module
    elif name == "ufuncs":
        from lazytensor.ops import ufuncs as module
    elif name == "elementwise":
        from lazytensor.ops import elementwise as module
    elif name == "scans":
        from lazytensor.ops import scans as module
    elif name == "indexing":
        from lazytensor.ops import indexing as module
    elif name == "array_api":
        from lazytensor import array_api as module
    elif name == "evaluation":
        from lazytensor.assign import evaluate as module
    elif name == "display":
        from lazytensor.tools import display as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = module
    return module
