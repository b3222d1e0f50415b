"""The CUDA C of backward kernels without a GPU: the elementwise gradient of every rule, in float16,
float32 and float64, rendered for CUDA and compiled to PTX with NVRTC."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")

import lazytensor as lt  # noqa: E402
from lazytensor.kernels.cuda.layout import flat_geometry  # noqa: E402
from lazytensor.kernels.cuda.render_cuda import render_cuda  # noqa: E402
from lazytensor.plan.lower import lower  # noqa: E402
from tests.autodiff.test_autodiff_rules import BINARY, UNARY, _BUILD  # noqa: E402
from tests.kernels.test_cuda_codegen import _compile_together  # noqa: E402


def _gradients(dtype):
    rng = np.random.default_rng(0)
    x, y = (lt.asarray(rng.uniform(0.5, 2, 64).astype(dtype), device="cpu") for _ in range(2))
    out = []
    for op in UNARY:
        out.extend(lt.grad(getattr(lt, op)(x), [x], grad_output=y))
    for op in BINARY:
        out.extend(lt.grad(_BUILD[op](x, y), [x, y], grad_output=y))
    out.extend(lt.grad(lt.where(x > 1, lt.clip(x, 0.7, 1.5), y * 2), [x, y], grad_output=x))
    return [g for g in out if isinstance(g, lt.Expr) and not g.heavy]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_backward_kernels_compile(dtype):
    sources = {}
    for g in _gradients(dtype):
        program, _, _ = lower(g, g.dtype)
        source = render_cuda(program, flat_geometry(program, 1 << 20, [0] * (program.n_inputs + 1)).layout)
        sources[source.name] = source
    assert len(sources) > 20
    _compile_together(list(sources.values()), optimize=False)
