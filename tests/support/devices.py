"""What the machine running the tests offers: GPU tests skip cleanly where it is absent."""
from __future__ import annotations

import lazytensor as lt


def cudnn_ready() -> bool:
    """CuPy with a CUDA device, and the cuDNN frontend that the CBR path on CUDA needs."""
    if not lt.cuda_usable():
        return False
    try:
        import cudnn  # noqa: F401
    except Exception:  # noqa: BLE001 - any failure to import means no cuDNN path
        return False
    return True
