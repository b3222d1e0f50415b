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
