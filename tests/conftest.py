"""The suite tests the generated kernels themselves: every call waits for its kernel to compile
rather than running through the interpreter tier first (tests/assign/test_interpreter_tier.py tests that
tier and the hand-over). With LAZYTENSOR_TIER=interpreter (`make test`'s second run) every call runs
through the interpreter tier instead, and the tests marked `compiled_tier` (they assert what the
compiled kernels record, or a compile itself) are skipped."""
import os

import pytest

os.environ.setdefault("LAZYTENSOR_JIT_WAIT", "1")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("LAZYTENSOR_TIER", "") != "interpreter":
        return
    skip = pytest.mark.skip(reason="asserts the compiled tier (LAZYTENSOR_TIER=interpreter forces the interpreter)")
    for item in items:
        if "compiled_tier" in item.keywords:
            item.add_marker(skip)
