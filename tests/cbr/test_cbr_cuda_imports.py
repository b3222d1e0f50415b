"""The cuDNN side of cbr imports, and says clearly what is missing, on a machine without CUDA."""

import importlib
import sys

import pytest

MODULES = [
    "lazytensor.cbr.cudnn_support",
    "lazytensor.cbr.cudnn_handle",
    "lazytensor.cbr.cudnn_graphs",
    "lazytensor.cbr.cudnn_plans",
    "lazytensor.cbr.cudnn_cache",
    "lazytensor.cbr.cudnn_conv",
    "lazytensor.kernels.timing",
    "lazytensor.cbr.tune",
    "lazytensor.bench.cudnn_calls",
]


def test_modules_import_without_touching_cupy_or_cudnn():
    already = {m for m in ("cupy", "cudnn") if m in sys.modules}
    for name in MODULES:
        importlib.import_module(name)
    assert {m for m in ("cupy", "cudnn") if m in sys.modules} == already


def test_missing_cuda_stack_is_a_clear_error(monkeypatch):
    from lazytensor.cbr.cudnn_errors import CudnnUnavailable
    from lazytensor.cbr.cudnn_handle import import_cuda_modules

    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy now raises ImportError
    with pytest.raises(CudnnUnavailable, match=r"needs CuPy.*'cuda' extra.*device='cpu'"):
        import_cuda_modules()


def test_shape_refusals_name_the_fix():
    from lazytensor.cbr.cudnn_support import cudnn_shape_refusal

    assert cudnn_shape_refusal((8, 56, 56, 64), (64, 3, 3, 64), "float16") is None
    assert "pad C to 8" in cudnn_shape_refusal((8, 224, 224, 3), (64, 3, 3, 3), "float16")
    assert "pad K to 24" in cudnn_shape_refusal((8, 56, 56, 64), (20, 3, 3, 64), "float16")
    assert cudnn_shape_refusal((8, 56, 56, 64), (64, 3, 3, 64), "float32") is None
    assert "got int32" in cudnn_shape_refusal((8, 56, 56, 64), (64, 3, 3, 64), "int32")
