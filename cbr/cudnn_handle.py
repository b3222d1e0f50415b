"""One cuDNN handle per CUDA device, pointed at CuPy's current stream before each launch.

A handle is bound to the device that was current when it was made, so they are kept per device.
`cudnn.set_stream` is skipped by the frontend when the stream is unchanged, so calling it on every
launch costs a comparison in the steady state and keeps cuDNN on whatever stream the caller chose.
"""

from __future__ import annotations

from .cudnn_errors import CudnnUnavailable

_handles: dict[int, object] = {}


def import_cuda_modules():
    """(cupy, cudnn), imported on first use so that the package imports on machines without a GPU."""
    try:
        import cupy
    except Exception as e:  # noqa: BLE001
        raise CudnnUnavailable("CuPy", e) from e
    try:
        import cudnn
    except Exception as e:  # noqa: BLE001
        raise CudnnUnavailable("the cuDNN frontend Python binding (import cudnn)", e) from e
    return cupy, cudnn


def current_device_id() -> int:
    cupy, _ = import_cuda_modules()
    return cupy.cuda.Device().id


def handle_for_device(device_id: int):
    """The handle of `device_id` (made while that device is current)."""
    handle = _handles.get(device_id)
    if handle is None:
        cupy, cudnn = import_cuda_modules()
        with cupy.cuda.Device(device_id):
            handle = cudnn.create_handle()
        _handles[device_id] = handle
    return handle


def bind_current_stream(handle) -> int:
    """Point `handle` at CuPy's current stream; returns the stream pointer."""
    cupy, cudnn = import_cuda_modules()
    stream = cupy.cuda.get_current_stream().ptr
    cudnn.set_stream(handle=handle, stream=stream)
    return stream
