"""The suite tests the generated kernels themselves: every call waits for its kernel to compile
rather than running through the interpreter tier first (tests/assign/test_interpreter_tier.py tests that
tier and the hand-over)."""
import os

os.environ.setdefault("LAZYTENSOR_JIT_WAIT", "1")
os.environ.setdefault("SCIPY_ARRAY_API", "1")   # tests/clients: SciPy reads it once, when it is imported

# float32 on CUDA is checked against float64 and NumPy to float32's precision: the suite runs with
# TF32 convolutions off (lt.config's default is PyTorch's, on); tests of TF32 turn it on themselves.
import lazytensor as _lt  # noqa: E402

_lt.config.conv_allow_tf32 = False
