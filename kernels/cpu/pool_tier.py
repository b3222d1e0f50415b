"""Which pooling kernel a CPU pool step runs: numba's (kernels/cpu/pool.py) once it is compiled for
the call's argument types, else its NumPy twin (kernels/cpu/pool_numpy.py, the same bits) while a
compile worker compiles numba's into the disk cache and the loading thread loads it from there. With
LAZYTENSOR_JIT_WAIT=1 the call compiles numba's itself; with the interpreter tier forced, NumPy's
serves every call.

Design: docs/design/tiers.md.
"""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.background_compile import RemoteJob, wait_for_compiler
from lazytensor.kernels.cpu import pool_numpy
from lazytensor.kernels.tier import interpreter_forced

_HALVES = pool_numpy._HALVES


def _description(a) -> tuple:
    """What numba's type of a pooling argument depends on: dtype, layout, writeability."""
    flags = a.flags
    layout = "C" if flags.c_contiguous else ("F" if flags.f_contiguous else "A")
    return np.dtype(a.dtype).str, layout, bool(flags.writeable)


def _computed(a):
    """The array pool.py hands numba for `a` (float16 and bfloat16 computed in float32)."""
    return np.empty_like(a, np.float32) if a.dtype in _HALVES else a      # (astype's layout)


def _small(description):
    """A 4-d array of that description, a few elements: numba's compile for its type."""
    dtype, layout, writeable = description
    if layout == "C":
        a = np.zeros((1, 1, 2, 1), dtype)
    elif layout == "F":
        a = np.asfortranarray(np.zeros((2, 1, 1, 2), dtype))
    else:
        a = np.zeros((1, 1, 2, 2), dtype)[..., ::2]
    a.flags.writeable = writeable
    return a


def compile_pool(direction, kind, descriptions, kernel, stride, padding):
    """The numba pooling kernel of that call's types, compiled (into numba's disk cache) by a run on
    small arrays (every index is bounds-checked there: windows past the array read nothing). Once
    no other job waits: a parallel pooling kernel takes numba 5-10 s, which the elementwise kernels
    and reductions behind it would wait for, while the twin serves pooling at NumPy's speed."""
    from lazytensor.kernels.compile_worker import LATER
    yield LATER
    _run_small(direction, kind, descriptions, kernel, stride, padding)
    yield direction


def _pool():
    """The numba pooling kernels, imported on first use (whole or not at all: numba_import)."""
    from lazytensor.kernels.cpu.numba_import import import_numba
    import_numba()
    from lazytensor.kernels.cpu import pool
    return pool


def _run_small(direction, kind, descriptions, kernel, stride, padding):
    pool = _pool()
    arrays = [_small(d) for d in descriptions]
    if direction == "forward":
        x, y = arrays
        pool._forward(x, y, kind == "max", *kernel, *stride, *padding)
    else:
        x, g, dx = arrays
        pool._backward(x, g, dx, kind == "max", *kernel, *stride, *padding)


def run_pool(compiler, direction, kind, x, g, kernel, stride, padding, out) -> None:
    """out = the pooling (forward) or its input gradient (backward; x None for avg) of the step."""
    if wait_for_compiler():
        _numba(direction, kind, x, g, kernel, stride, padding, out)
        return
    if interpreter_forced():
        _twin(direction, kind, x, g, kernel, stride, padding, out)
        return
    if direction == "forward":
        descriptions = (_description(_computed(x)), _description(_computed(out)))
    else:
        gc = _computed(g)
        descriptions = (_description(gc if x is None else _computed(x)), _description(gc), _description(_computed(out)))
    key = ("pool", direction, kind, descriptions, tuple(kernel), tuple(stride), tuple(padding))
    flag = compiler.open_flag(key)
    if flag is not None and not flag[0] and not compiler.failed(key) and compiler.lost(key) is None:
        _numba(direction, kind, x, g, kernel, stride, padding, out)
        return
    _twin(direction, kind, x, g, kernel, stride, padding, out)
    if flag is None:
        args = (direction, kind, descriptions, tuple(kernel), tuple(stride), tuple(padding))
        local = lambda: _run_small(*args)      # noqa: E731  (where no worker: here; and the load)
        compiler.submit(key, RemoteJob(compile_pool, args, lambda _: local(), local))


def _numba(direction, kind, x, g, kernel, stride, padding, out):
    pool = _pool()
    if direction == "forward":
        pool.pool_forward(kind, x, kernel, stride, padding, out)
    else:
        pool.pool_backward(kind, x, g, kernel, stride, padding, out)


def _twin(direction, kind, x, g, kernel, stride, padding, out):
    if direction == "forward":
        pool_numpy.pool_forward(kind, x, kernel, stride, padding, out)
    else:
        pool_numpy.pool_backward(kind, x, g, kernel, stride, padding, out)
