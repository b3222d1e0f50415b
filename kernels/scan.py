"""What a scan kernel computes: cumsum or cumprod along one axis of the values of an
ElementwiseProgram evaluated over `shape` (the elementwise expression feeding the scan runs inside
the scan's kernel, as a reduction's does). Each value is converted to `out_dtype` and accumulated
in it, one element after the other along the axis, as NumPy's add.accumulate does: integers wrap,
float16 is rounded after every step, and float results are NumPy's bit for bit (same order, same
roundings). `run_scan_with_numpy` is that meaning written with NumPy: the CPU backend's interpreter
tier, and the tests' reference for the kernels."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lazytensor.kernels.cpu.interpret import run_program
from lazytensor.kernels.program import ElementwiseProgram


@dataclass(frozen=True)
class Scan:
    kind: str           # "cumsum" or "cumprod"
    axis: int           # normalized: 0 <= axis < len(shape)
    shape: tuple        # the input's (broadcast) shape, which is also the result's
    out_dtype: np.dtype

    @property
    def op(self) -> str:
        return "+" if self.kind == "cumsum" else "*"

    @property
    def identity(self) -> int:
        return 0 if self.kind == "cumsum" else 1

    def split(self) -> tuple:
        """(elements before the axis, its length, elements after it): the scan's rows are the
        (outer, inner) pairs, each scanned along the axis."""
        outer = inner = 1
        for d in self.shape[:self.axis]:
            outer *= d
        for d in self.shape[self.axis + 1:]:
            inner *= d
        return outer, self.shape[self.axis], inner


def run_scan_with_numpy(program: ElementwiseProgram, spec: Scan, out, inputs, scalars) -> None:
    """out[...] = the scan, computed by the program's NumPy interpreter and np.cumsum/np.cumprod."""
    values = np.empty(spec.shape, spec.out_dtype)
    run_program(program, values, inputs, scalars)
    with np.errstate(all="ignore"):
        result = getattr(np, spec.kind)(values, axis=spec.axis, dtype=spec.out_dtype)
        if spec.kind == "cumsum" and result.dtype.kind == "f":
            # the kernels' running sum starts at +0.0, so it is never -0.0; NumPy's starts at the
            # first element and keeps a leading run of -0.0
            result += result.dtype.type(0)
        out[...] = result
