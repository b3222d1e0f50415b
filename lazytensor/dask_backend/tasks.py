"""The graph pass that evaluates each Dask task's result in the task: Dask fuses a blockwise chain
into one task, whose operators on lazytensor chunks build one expression; the pass wraps each task
so that the expression is evaluated (one kernel) before the task ends, on the worker that ran it.
An elementwise result that exactly one other task reads stays lazy: it fuses into that task's
kernel (it is evaluated where it is pickled, moved to another worker or spilled).

Design: docs/design/dask.md
"""
from __future__ import annotations

import os
import threading

from lazytensor.assign.evaluate import result_of
from lazytensor.assign.simultaneous import evaluate_all
from lazytensor.core.expr import Expr


_thread = threading.local()


def _kernel_threads() -> None:
    """Dask's workers run native libraries on OMP_NUM_THREADS threads (distributed sets it to 1:
    the worker's own threads share the cores); lazytensor's CPU kernels follow it, in each thread
    that runs tasks, unless NUMBA_NUM_THREADS says otherwise."""
    _thread.set = True
    wanted = os.environ.get("OMP_NUM_THREADS")
    if wanted and wanted.isdigit() and "NUMBA_NUM_THREADS" not in os.environ:
        import numba
        numba.set_num_threads(max(1, min(int(wanted), numba.config.NUMBA_NUM_THREADS)))


def settle(value, lazy_ok=False):
    """A task's result with every expression in it evaluated (an elementwise one kept lazy where
    `lazy_ok`); tuples, lists and dicts (Dask's reductions' partial results) are walked."""
    if not getattr(_thread, "set", False):
        _kernel_threads()
    t = type(value)
    if t is Expr:
        if value.result is not None:
            return value.result
        if lazy_ok and not value.heavy:
            return value
        return result_of(value)
    if t is tuple or t is list or t is dict:
        return _settle_all(value)
    return value


def _settle_all(value):
    items = list(value.values()) if type(value) is dict else list(value)
    pending = [i for i, v in enumerate(items) if type(v) is Expr and v.result is None]
    if len(pending) > 1:
        for i, r in zip(pending, evaluate_all([items[i] for i in pending])):
            items[i] = r
    settled = [settle(v) for v in items]
    if all(a is b for a, b in zip(settled, value.values() if type(value) is dict else value)):
        return value            # nothing lazy inside (NumPy chunks' results pass untouched)
    if type(value) is dict:
        return dict(zip(value.keys(), settled))
    return type(value)(settled)


def settled_graph(dsk: dict, keys) -> dict:
    """`dsk` (a task-spec graph) with each task's result settled."""
    from dask._task_spec import Alias, Task
    from dask.core import flatten

    def target(key):
        node = dsk.get(key)
        while type(node) is Alias:
            key = node.target
            node = dsk.get(key)
        return key

    readers: dict = {}
    for node in dsk.values():
        if type(node) is not Alias:
            for dep in node.dependencies:
                dep = target(dep)
                readers[dep] = readers.get(dep, 0) + 1
    outputs = {target(k) for k in flatten(keys)}
    out = {}
    for key, node in dsk.items():
        if isinstance(node, Task):
            lazy_ok = key not in outputs and readers.get(key, 0) == 1
            node = Task(key, settle, node, lazy_ok, _data_producer=node.data_producer)
        out[key] = node
    return out


_previous = []


def optimize(dsk, keys, **kwargs):
    """Dask's array optimization (the one configured before lazytensor's), then settled tasks."""
    from dask._task_spec import convert_legacy_graph
    from dask.array.optimization import optimize as dask_optimize
    from dask.utils import ensure_dict

    from lazytensor.dask_backend.serialize import register_where_distributed_is_loaded
    register_where_distributed_is_loaded()      # a client made after register(): it reads the results
    dsk = (_previous[0] or dask_optimize)(dsk, keys, **kwargs)
    return settled_graph(convert_legacy_graph(ensure_dict(dsk)), keys)


def install() -> None:
    """Dask's "array_optimize" setting: this module's optimize, after the one set before."""
    import dask
    current = dask.config.get("array_optimize", None)
    if current is optimize:
        return
    _previous[:] = [current]
    dask.config.set({"array_optimize": optimize})
