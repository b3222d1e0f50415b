"""The suite tests the generated kernels themselves: every call waits for its kernel to compile
rather than running through the interpreter tier first (tests/assign/test_interpreter_tier.py tests that
tier and the hand-over). With LAZYTENSOR_TIER=interpreter (`make test`'s second run) every call runs
through the interpreter tier instead, and the tests marked `compiled_tier` (they assert what the
compiled kernels record, or a compile itself) are skipped."""
import os

import pytest

os.environ.setdefault("LAZYTENSOR_JIT_WAIT", "1")
os.environ.setdefault("SCIPY_ARRAY_API", "1")   # tests/clients: SciPy reads it once, when it is imported

# float32 on CUDA is checked against float64 and NumPy to float32's precision: the suite runs with
# TF32 convolutions off (lt.config's default is PyTorch's, on); tests of TF32 turn it on themselves.
import lazytensor as _lt  # noqa: E402

_lt.config.conv_allow_tf32 = False


def pytest_collection_modifyitems(config, items):
    if os.environ.get("LAZYTENSOR_TIER", "") != "interpreter":
        return
    skip = pytest.mark.skip(reason="asserts the compiled tier (LAZYTENSOR_TIER=interpreter forces the interpreter)")
    for item in items:
        if "compiled_tier" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=["compiled", "interpreter"])
def tier(request, monkeypatch):
    """A test's elementwise work in either CPU tier (the interpreter: no kernel cached, none
    compiled); a module may define its own `tier` instead."""
    if request.param == "interpreter":
        from lazytensor.kernels.backend import backend_for
        from lazytensor.kernels.cache import KernelCache
        backend = backend_for("cpu")
        monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
        monkeypatch.setattr(backend, "kernels", KernelCache())
        monkeypatch.setattr(backend.compiler, "submit", lambda key, job: None)
    return request.param
