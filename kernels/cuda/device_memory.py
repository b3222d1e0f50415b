"""Running out of GPU memory: one clear error, whoever allocated.

CuPy reports a failed allocation as cupy.cuda.memory.OutOfMemoryError ("Out of memory allocating
N bytes"), the CUDA runtime and driver as an error whose status is 2 (cudaErrorMemoryAllocation,
CUDA_ERROR_OUT_OF_MEMORY), lazytensor.cbr as CudnnOutOfMemory. Where lazytensor allocates (a plan's temporaries, a cuDNN workspace, a
graph capture) it turns them into DeviceOutOfMemory, which says what was being allocated and how
much; the step runner (lazytensor's evaluate) frees what the CUDA graphs keep, retries once, and
says whether the destination and the running statistics are as they were.
"""
from __future__ import annotations

import re
from contextlib import contextmanager

_ALLOCATING = re.compile(r"allocating ([\d,]+) bytes")


class DeviceOutOfMemory(MemoryError):
    """The GPU had no memory for an allocation: `what`, `nbytes` (None when unknown), and the
    allocator's own error as __cause__. `context` and `untouched` are filled in by the step runner."""

    def __init__(self, what: str, nbytes: int | None = None, cause: BaseException | None = None):
        super().__init__(what)
        self.what = what
        self.nbytes = nbytes if nbytes is not None else _bytes_in(cause)
        self.cause = cause
        self.context: list[str] = []    # where it happened, outermost last ("in step 2 of 4: ...")
        self.untouched: bool | None = None   # True: nothing the caller holds was written; None: not known
        self.retried = False

    def __str__(self) -> str:
        size = "" if self.nbytes is None else f" {self.nbytes:,} bytes ({_human(self.nbytes)}) for"
        text = f"out of GPU memory allocating{size} {self.what}"
        for where in self.context:
            text += f", {where}"
        if self.cause is not None:
            text += f" [{type(self.cause).__name__}: {str(self.cause).rstrip('.')}]"
        text += "."
        if self.retried:
            text += " lazytensor released the memory its CUDA graphs keep and tried once more, in vain."
        if self.untouched:
            text += (" Nothing was written: the destination, the running statistics and tensors updated in place "
                     "are as they were.")
        elif self.untouched is False:
            text += " The destination may have been written before the failure; the running statistics were not."
        return text + (" Free GPU memory (drop arrays no longer needed, lt.release_graphs(), "
                       "cupy.get_default_memory_pool().free_all_blocks()) and call again.")

    def __reduce__(self):
        return (DeviceOutOfMemory, (self.what, self.nbytes))


def _human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _bytes_in(error) -> int | None:
    m = _ALLOCATING.search(str(error)) if error is not None else None
    return int(m.group(1).replace(",", "")) if m else None


def is_out_of_memory(error: BaseException) -> bool:
    """Whether `error` says the GPU had no memory (CuPy's allocator, the CUDA runtime or driver)."""
    if isinstance(error, MemoryError):
        # CuPy's OutOfMemoryError, or a library's own that says what it was allocating (the cuDNN
        # workspace: lazytensor.cbr's CudnnOutOfMemory); a host MemoryError is not the GPU's.
        return type(error).__name__ == "OutOfMemoryError" or hasattr(error, "what")
    if type(error).__name__ in ("CUDARuntimeError", "CUDADriverError"):
        return getattr(error, "status", None) == 2 or "out of memory" in str(error).lower() \
            or "memoryallocation" in str(error).lower()
    return False


def as_out_of_memory(error: BaseException, what: str, nbytes: int | None = None) -> DeviceOutOfMemory:
    """`error` (an out-of-memory error) as a DeviceOutOfMemory about `what`."""
    if isinstance(error, DeviceOutOfMemory):
        return error
    if getattr(error, "what", None):          # it says what it was allocating: keep its words
        return DeviceOutOfMemory(error.what, getattr(error, "nbytes", None), getattr(error, "cause", None) or error)
    return DeviceOutOfMemory(what, nbytes, error)


@contextmanager
def allocating(what: str, nbytes: int | None = None):
    """Out-of-memory errors raised inside become a DeviceOutOfMemory about `what` (`nbytes` bytes)."""
    try:
        yield
    except DeviceOutOfMemory:
        raise
    except Exception as e:
        if is_out_of_memory(e):
            raise as_out_of_memory(e, what, nbytes) from e
        raise
