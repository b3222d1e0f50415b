"""Planning fft nodes (lazytensor.ops.fft): one library call per node, NumPy's pocketfft on the CPU and
cuFFT through CuPy on CUDA (kernels/fft.py). The operand is evaluated first (the elementwise work
feeding it fuses into that kernel); the work reading the result fuses into the next kernel."""
from __future__ import annotations

from lazytensor.core.tensor import Tensor
from lazytensor.kernels.fft import ONE_AXIS, run_fft
from lazytensor.plan.evaluated import materialized
from lazytensor.plan.steps import Step


class FftStep(Step):
    """out[...] = fft function `fn` (with `params`) of `a`."""
    __slots__ = ("backend", "fn", "params", "a", "out")

    def __init__(self, backend, fn, params, a, out):
        self.backend, self.fn, self.params, self.a, self.out = backend, fn, params, a, out

    def run(self):
        run_fft(self.backend, self.fn, self.params, self.a, self.out)

    def capture_refusal(self):
        if not self.backend.graphs:
            return f"the {self.backend.name} backend has no graphs"
        return f"fft.{self.fn} runs in CuPy's cuFFT wrappers, which make their plan on the host inside the call"

    def describe(self, source: bool = True) -> str:
        how = "pocketfft through NumPy" if self.backend.host_memory else "cuFFT through CuPy"
        names = ("n", "axis", "norm") if ONE_AXIS[self.fn] else ("s", "axes", "norm")
        params = ", ".join(f"{k}={v!r}" for k, v in zip(names, self.params))
        return (f"FFT on {self.backend.name}: {self.fn}({tuple(self.a.shape)}, {params}) -> {tuple(self.out.shape)} "
                f"{self.out.dtype}: {how}; elementwise work on the result runs in the next fused kernel")


def build_fft(node, backend, cut, out):
    """The call as a step writing the node's result (into the destination where the node is the plan's root)."""
    fn, params = node.attrs
    steps: list = []
    (a,) = [materialized(cut(x), backend, steps, cut) for x in node.args]
    result = out if out is not None else backend.empty(node.shape, node.dtype)
    steps.append(FftStep(backend, fn, params, a.data, result))
    return steps, Tensor(result, node.device)
