"""The suite tests the generated kernels themselves: every call waits for its kernel to compile
rather than running through the interpreter tier first (tests/assign/test_interpreter_tier.py tests that
tier and the hand-over)."""
import os

os.environ.setdefault("LAZYTENSOR_JIT_WAIT", "1")
os.environ.setdefault("SCIPY_ARRAY_API", "1")   # tests/clients: SciPy reads it once, when it is imported
