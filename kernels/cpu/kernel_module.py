"""A kernel's generated module: its name (the hash of its text), its file in the disk cache folder,
its import; and the numba signatures of its functions from plain descriptions of their arguments.

Design: docs/design/kernels.md, section "kernels/cpu/backend.py".
"""
from __future__ import annotations

import hashlib
import os
import sys
import types

from lazytensor.kernels.cache import cache_folder, report_damaged, write_atomically
from lazytensor.kernels.cpu.numba_import import import_numba

# Kernels inline the prelude's helpers, but numba's cache only checks the kernel module's own
# stamp: the prelude's hash goes into every kernel's name, so a changed prelude is never served stale.
with open(os.path.join(os.path.dirname(__file__), "numba_prelude.py"), "rb") as _prelude:
    _PRELUDE_HASH = hashlib.sha1(_prelude.read()).hexdigest()


def kernel_name(source: str) -> str:
    return "lt_" + hashlib.sha1((_PRELUDE_HASH + source).encode()).hexdigest()[:20]


def module_for(source: str):
    """(name, module, path) of the kernel whose text is `source`: written to the cache folder if
    it is not there yet (numba's cache stamps a module by its file's time and size, so a file with
    the right text is never written again), then imported; path None where the folder cannot be
    used (numba keeps the functions in memory only)."""
    name = kernel_name(source)
    folder = cache_folder("cpu")
    path = None if folder is None else folder / f"{name}.py"
    if path is not None:
        # The module's name is the hash of its text: any other text there is a damaged entry.
        try:
            current = path.read_text()
        except FileNotFoundError:
            current = None
        except (OSError, UnicodeDecodeError) as e:
            current = e
        if current != source:
            if current is not None:
                report_damaged(path, "cut short or overwritten: it is not the kernel's text")
            if not write_atomically(path, source):
                path = None             # the folder cannot be written: no disk cache
    return name, _import(name, source, path), path


def on_disk(source: str, fn_names) -> bool:
    """Whether the kernel of `source` is in the cache folder with numba's index of each of
    `fn_names` beside it (left there by a process before: loading them takes milliseconds)."""
    folder = cache_folder("cpu")
    if folder is None:
        return False
    name = kernel_name(source)
    if not (folder / f"{name}.py").is_file():
        return False
    indexes = {p.name.split(".")[1].rsplit("-", 1)[0] for p in (folder / "__pycache__").glob(f"{name}.*.nbi")}
    return all(fn in indexes for fn in fn_names)


def _import(name, source, path):
    """The kernel module from its text: numba caches its functions beside `path` (checked: a damaged
    numba file is reported and rebuilt), or, with no path, keeps them in memory only."""
    import_numba()          # (whole: an interrupt during numba's import would break it for the process)
    module = types.ModuleType(name)
    module.__file__ = str(path) if path is not None else f"<lazytensor kernel {name}>"
    if path is None:
        source = source.replace("cache=True", "cache=False")
    # numba's cache reloads a kernel's environment by module name, so the module must be importable.
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    if path is not None:
        from lazytensor.kernels.cpu.numba_cache import check_module      # imports numba, as the module above did
        check_module(module)
    return module


INTP = "intp"


def numba_signature(args: tuple) -> tuple:
    """numba's types of a function's arguments, each described as an array's (dtype, ndim, layout,
    readonly, aligned), INTP, or a scalar value (typed as numba types it)."""
    import numba
    sig = []
    for a in args:
        if isinstance(a, tuple):
            dtype, ndim, layout, readonly, aligned = a
            sig.append(numba.types.Array(numba.from_dtype(dtype), ndim, layout, readonly=readonly, aligned=aligned))
        elif isinstance(a, str) and a == INTP:
            sig.append(numba.intp)
        else:
            sig.append(numba.typeof(a))
    return tuple(sig)


def compile_calls(module, calls) -> None:
    """Compile each (function name, argument descriptions) of `calls` in `module`, in order."""
    for fn_name, args in calls:
        getattr(module, fn_name).compile(numba_signature(args))
