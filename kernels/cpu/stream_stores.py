"""When a CPU elementwise call writes its results with streaming stores (kernel_stream of
kernels/cpu/render_numba.py, stores of kernels/cpu/numba_stream.py), and from which element on.

Streaming stores skip the read that an ordinary store of an uncached line makes (write allocate), but
they also bypass the cache: results that fit in the last-level cache stay there for the next step
with ordinary stores, so only calls writing more than that stream. The stores go 32 bytes at a time
to 32-byte boundaries: every output must be C-contiguous and reach such a boundary at the same
element (arrays from one allocator do: glibc gives large blocks the same offset in their page).
"""
from __future__ import annotations

import functools
import glob

# Elements per buffer. A block's streaming stores go out in one burst, which stalls the core once
# the write-combining buffers are full, so smaller blocks overlap better with the next block's
# loads; but each block also pays the loop's entry (the constants of a tanh put in registers). With
# the buffers on the stack (no alias checks at each entry), the gradients of sum(tanh(a*b+c)*d), 2^24
# float32 on 2 threads, took the same with blocks of 128, 256 and 512 elements, and up to 1 ms more
# with 1024 and 2 ms with 2048 (medians of 25 calls, 20-23 ms). (Heap buffers, before: blocks of 128
# cost 20 ms more than 512.)
STREAM_BLOCK = 512
STREAM_CHUNKS = 64          # parallel iterations, each a run of blocks with its buffers and one fence
_ALIGN = 32                 # kernels/cpu/numba_stream.VECTOR_BYTES (numba-free here)


@functools.lru_cache(maxsize=None)
def last_level_cache_bytes() -> int:
    """The largest CPU cache Linux reports (32 MiB when it reports none)."""
    sizes = []
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=32 << 20)


# Calls writing fewer bytes store ordinarily (tests lower it to stream small arrays).
MIN_BYTES = last_level_cache_bytes()


def aligned_head(outputs) -> int | None:
    """The first element at which every output lies on a 32-byte boundary (None if there is none)."""
    places = [(o.ctypes.data, o.itemsize) for o in outputs]
    for head in range(_ALIGN):
        if all((address + head * itemsize) % _ALIGN == 0 for address, itemsize in places):
            return head
    return None


def stream_head(outputs) -> tuple:
    """(head, None) when a call writing `outputs` (its destination first) streams: elements [0, head)
    are stored ordinarily, the 32-byte-aligned blocks from `head` on stream. (None, why) when it
    stores ordinarily."""
    nbytes = sum(o.nbytes for o in outputs)
    if nbytes < MIN_BYTES:
        return None, (f"results of {nbytes} bytes fit in the last-level cache ({MIN_BYTES} bytes): "
                      "ordinary stores keep them there for the next step")
    if not all(o.flags.c_contiguous for o in outputs):
        return None, "an output is not contiguous"
    head = aligned_head(outputs)
    if head is None:
        return None, "the outputs reach a 32-byte boundary at different elements"
    if head >= outputs[0].size:
        return None, "no element of the outputs lies on a 32-byte boundary"
    return head, None
