"""The interpreter tier's segmented sums (lazytensor.ops.segments): the program's values computed
with NumPy, a piece at a time, and each segment summed in the order of the numba kernel
(kernels/cpu/render_numba_segments.py: the same chunks, LANES partial sums each), so a value keeps
its bits when the compiled kernel takes over.

Design: docs/design/tiers.md.
"""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.cpu.interpret import converted_scalars, evaluate_block
from lazytensor.kernels.cpu.interpret_reduce import PIECE, _lanes


def run_segment_sums(program, segments, out, inputs, scalars, chunks, acc_dtype) -> None:
    """out[k, s] = the sum over segment s of the program's output k; `chunks`: segment_chunks'."""
    lo, hi, first, count = chunks
    acc = np.dtype(acc_dtype)
    stores = [vid for vid, _ in program.stores()]
    scalar_values = converted_scalars(program, scalars)
    ins = [a.reshape(-1) for a in inputs[:program.n_inputs]]
    whole: dict = {}

    def values(k):
        def piece(index):
            (part,) = index
            if segments.length <= PIECE:    # computed once for every chunk of every output
                if not whole:
                    whole.update(enumerate(_computed(slice(None))))
                return whole[k][part]
            return _computed(part)[k]
        return piece

    def _computed(part):
        blocks = [a if a.size == 1 else a[part] for a in ins]
        n = len(range(*part.indices(segments.length)))
        vals = evaluate_block(program, blocks, scalars, scalar_values)
        return [np.broadcast_to(vals[vid], (n,)) for vid in stores]

    with np.errstate(all="ignore"):
        for k in range(len(stores)):
            partials = [_lanes(values(k), (segments.length,), int(a), int(b), acc)[0] for a, b in zip(lo, hi)]
            for s, (f, c) in enumerate(zip(first, count)):
                total = acc.type(0)
                for part in partials[f:f + c]:
                    total += part
                out[k, s] = total
