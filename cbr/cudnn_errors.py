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


class CudnnOutOfMemory(MemoryError):
    """The GPU had no memory for what a cuDNN graph needs (its workspace): `what`, `nbytes`, and the
    allocator's error as __cause__. lazytensor's step runner reports it as a DeviceOutOfMemory."""

    def __init__(self, what: str, nbytes: int | None, cause: BaseException | None = None):
        super().__init__(f"out of GPU memory allocating {nbytes:,} bytes for {what}" if nbytes is not None
                         else f"out of GPU memory allocating {what}")
        self.what, self.nbytes, self.cause = what, nbytes, cause


def is_out_of_memory(error: BaseException) -> bool:
    """CuPy's OutOfMemoryError, or a CUDA runtime or driver error whose status is 2 (out of memory)."""
    if isinstance(error, MemoryError):
        return True
    if type(error).__name__ in ("CUDARuntimeError", "CUDADriverError"):
        text = str(error).lower()
        return getattr(error, "status", None) == 2 or "out of memory" in text or "memoryallocation" in text
    return False
