"""Which tier serves the CPU's first calls. LAZYTENSOR_TIER=interpreter forces the interpreter tier:
no kernel compiles (in the background or the foreground, LAZYTENSOR_JIT_WAIT notwithstanding), so
every fused call runs through kernels/cpu/interpret.py. The test suite's second run uses it, so that
each value test checks both tiers.

Design: docs/design/tiers.md.
"""
from __future__ import annotations

import os


def interpreter_forced() -> bool:
    return os.environ.get("LAZYTENSOR_TIER", "") == "interpreter"


_data = getattr(os.environ, "_data", None)
_encode = getattr(os.environ, "encodekey", None)
if isinstance(_data, dict) and _encode is not None:
    _MARK_KEYS = (_encode("LAZYTENSOR_TIER"), _encode("LAZYTENSOR_JIT_WAIT"))

    def tier_marks() -> tuple:
        """(LAZYTENSOR_TIER, LAZYTENSOR_JIT_WAIT) as set now, cheaply: read on every interpreted
        call, where os.environ.get costs most of a microsecond each."""
        return _data.get(_MARK_KEYS[0]), _data.get(_MARK_KEYS[1])
else:
    def tier_marks() -> tuple:
        return os.environ.get("LAZYTENSOR_TIER"), os.environ.get("LAZYTENSOR_JIT_WAIT")
