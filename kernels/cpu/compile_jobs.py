"""The jobs the compile worker (kernels/compile_worker.py) runs for the CPU backend: a kernel's
module compiled for the argument types of the call that asked, into numba's disk cache.

Design: docs/design/tiers.md, section "kernels/compile_worker.py".
"""
from __future__ import annotations

import os
import sys
import types

from lazytensor.kernels.compile_worker import LATER
from lazytensor.kernels.cpu.kernel_module import compile_calls, module_for


def warm_up(idle=lambda: True) -> None:
    """Import numba and, unless a job is waiting by then (`idle()` false), compile a small serial
    kernel in memory: numba's first compile in a process sets up its typing, the implementations
    kernels use (reshape, float32 casts) and LLVM's targets, a second or more that the first real
    kernel would otherwise wait for. A job already waiting compiles first: it pays that set-up
    once, where the warm-up's own kernel would delay it by its whole compile."""
    from lazytensor.kernels.cpu import numba_cache  # noqa: F401  (imports numba)
    from lazytensor.kernels.cpu.numba_import import set_up_registries
    set_up_registries()                     # (numba's lowering registries: any first compile's 0.4 s)
    if idle():
        _warm("kernel_seq")


def warm_up_when_idle() -> None:
    """The same for the parallel variant (prange's passes), once no job is waiting."""
    _warm("kernel_par")


def _warm(variant: str) -> None:
    import numpy as np

    from lazytensor.kernels.cpu import numba_cache  # noqa: F401  (imports numba)
    from lazytensor.kernels.cpu.render_numba import render_numba
    from lazytensor.kernels.program import Layout, program_for
    f32 = np.dtype(np.float32)
    program = program_for((("load", f32, 0), ("load", f32, 1), ("add", f32, 0, 1), ("scalar", f32, 0),
                           ("multiply", f32, 2, 3), ("relu", f32, 4)), 2, (f32,), f32)
    source = render_numba(program, Layout(1, True)).replace("cache=True", "cache=False")
    module = types.ModuleType("lt_warm_up")
    sys.modules[module.__name__] = module
    exec(compile(source, "<lazytensor warm-up kernel>", "exec"), module.__dict__)
    array = ((f32, 1, "C", False, True),) * 3
    compile_calls(module, [(variant, array + (1.0,))])


def compile_module(source, calls, cache_dir, urgent=None):
    """Write and import the kernel module of `source` in the cache folder `cache_dir` (the
    program's, as it was when it asked), then compile each of `calls` (function name, argument
    descriptions), yielding each function's name once its entry is on disk. After the first
    `urgent` calls (None: all), the rest waits for the worker to be idle (compile_worker.LATER)."""
    os.environ["LAZYTENSOR_CACHE_DIR"] = cache_dir
    _, module, path = module_for(source)
    if path is None:
        raise RuntimeError("the disk cache folder cannot be used: the kernel cannot be handed over")
    for i, call in enumerate(calls):
        if i == urgent:
            yield LATER
        compile_calls(module, [call])
        yield call[0]
