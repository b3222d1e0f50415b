"""Why the cuDNN path could not serve a call, as exceptions the caller can catch to fall back."""

from __future__ import annotations


class CudnnUnavailable(RuntimeError):
    """CuPy, the cuDNN frontend binding or a CUDA device is missing."""

    def __init__(self, what: str, cause: BaseException | None = None):
        detail = f": {cause}" if cause is not None else ""
        super().__init__(
            f"the cuDNN CBR path needs {what}{detail}. Install the 'cuda' extra "
            "(cupy-cuda13x, nvidia-cudnn-cu13, nvidia-cudnn-frontend) on a machine with an NVIDIA GPU, "
            "or run on device='cpu'"
        )


class CudnnGraphRejected(RuntimeError):
    """cuDNN will not build (or has no engine for) one graph of one shape: the caller falls back."""

    def __init__(self, kind: str, key, reason: str):
        self.kind = kind
        self.key = key
        self.reason = reason
        super().__init__(f"cuDNN rejected the {kind} graph for {key}: {reason}")
