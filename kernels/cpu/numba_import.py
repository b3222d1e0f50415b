"""numba imported (and its registries set up) whole or not at all. An interrupt (Ctrl-C) in the middle of numba's import (seconds,
the first compile's) would leave numba and the packages it imports half-initialized for the rest of
the process: every later call raises AttributeError (module 'numba' has no attribute 'core'). So in
the main thread, where Python delivers SIGINT, the import runs with the interrupt held back and
raised when it has finished: the call is interrupted, the process keeps a working numba.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

_imported = False
_importing = threading.Lock()       # (one thread imports; another waits for it to finish)


def import_numba() -> None:
    """Import numba and lazytensor's numba helpers (every kernel module imports them)."""
    if _imported:
        return
    with _importing, _interrupts_held(_done):
        if _imported:
            return
        import numba                    # noqa: F401
        import numba.core.caching       # noqa: F401
        import numba.core.registry      # noqa: F401
        import numba.core.serialize     # noqa: F401
        import numba.np.arrayobj        # noqa: F401
        import lazytensor.kernels.cpu.numba_cache     # noqa: F401
        import lazytensor.kernels.cpu.numba_prelude   # noqa: F401
        import lazytensor.kernels.cpu.numba_stream    # noqa: F401
        # numba's lowering and typing registries, set up by the first compile otherwise: an
        # interrupt there leaves them half-installed too (every later compile raised
        # "generator raised StopIteration" from the registry loader).
        set_up_registries()


def set_up_registries() -> None:
    """numba's typing and lowering registries installed (what its first compile does otherwise),
    under numba's compiler lock: their loaders are generators, and two threads refreshing at once
    (a compile thread and a load on the caller's) fail with "generator already executing"."""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target
    with global_compiler_lock:
        cpu_target.target_context.refresh()
        cpu_target.typing_context.refresh()


def interrupts_held():
    """A context in which SIGINT is held back (main thread) and raised once it ends: for a few
    writes that must all happen or none (the BN running statistics' commit)."""
    return _interrupts_held(lambda: None)


def _done() -> None:
    global _imported
    _imported = True


@contextmanager
def _interrupts_held(on_success):
    """SIGINT recorded instead of raised while the block runs, then raised as the handler before it
    would have (a KeyboardInterrupt by default), after on_success() where the block completed.
    Elsewhere than in the main thread, nothing to hold."""
    if threading.current_thread() is not threading.main_thread():
        yield
        on_success()
        return
    caught = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    except (ValueError, OSError):       # (an embedding interpreter without signal support)
        yield
        on_success()
        return
    try:
        yield
        on_success()
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            if callable(previous):
                previous(signal.SIGINT, caught[0])
            elif previous != signal.SIG_IGN:
                raise KeyboardInterrupt
