"""CUDA code generation of complex64 and complex128 without a GPU: every complex op, cast, scalar
operand and reduction kernel renders and compiles to PTX with NVRTC (kernels/cuda/complex_prelude.py)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")

import lazytensor as lt  # noqa: E402
from lazytensor.core.expr import apply  # noqa: E402
from lazytensor.kernels.cuda.accumulators import ACCUMULATORS  # noqa: E402
from lazytensor.kernels.cuda.kernel import scalar_arguments, scalar_converters  # noqa: E402
from lazytensor.kernels.cuda.layout import flat_geometry  # noqa: E402
from lazytensor.kernels.cuda.nvrtc_check import compile_to_ptx  # noqa: E402
from lazytensor.kernels.cuda.prelude import prelude  # noqa: E402
from lazytensor.kernels.cuda.render_cuda import render_cuda  # noqa: E402
from lazytensor.kernels.ops import COMPLEX_DTYPES, COMPLEX_OPS, DTYPES, OPS  # noqa: E402
from lazytensor.kernels.program import program_for  # noqa: E402
from lazytensor.plan.lower import lower  # noqa: E402
from tests.kernels.test_cuda_reduce_codegen import _render  # noqa: E402


def _compile(sources, reductions=False) -> str:
    unit = prelude(any(s.float16 for s in sources), any(s.bfloat16 for s in sources), True) + (ACCUMULATORS if reductions else "") + "\n" + "\n".join(
        s.kernel for s in {s.name: s for s in sources}.values())
    text = compile_to_ptx(unit, name=f"complex_{len(sources)}.cu", optimize=False)
    for s in sources:
        assert f".entry {s.name}(" in text, s.name
    return text


def _flat(expr):
    program, _, _ = lower(expr, expr.dtype)
    return render_cuda(program, flat_geometry(program, 1 << 20, [0] * (program.n_inputs + 1)).layout)


def _tensor(dtype, shape=(8,)):
    return lt.asarray(np.arange(1, 1 + int(np.prod(shape))).reshape(shape).astype(dtype))


def test_every_complex_op_compiles_with_array_and_scalar_operands():
    sources = []
    for name in sorted(COMPLEX_OPS):
        for dtype in COMPLEX_DTYPES:
            arity = OPS[name].arity
            operands = {1: [(_tensor(dtype),)], 2: [(_tensor(dtype), _tensor(dtype)), (_tensor(dtype), 1.5 - 2j)],
                        3: [(_tensor(bool), _tensor(dtype), _tensor(dtype)), (_tensor(bool), _tensor(dtype), 2j)]}[arity]
            for ops in operands:
                sources.append(_flat(apply(name, *ops)))
    _compile(sources)


def test_every_cast_to_and_from_complex_compiles():
    sources = []
    for src, dst in itertools.product(DTYPES + COMPLEX_DTYPES, COMPLEX_DTYPES):
        for a, b in ((src, dst), (dst, src)):
            program = program_for((("load", a, 0), ("astype", b, 0)), 1, (), b)
            sources.append(render_cuda(program, flat_geometry(program, 4096, [0, 0]).layout))
    _compile(sources)


def test_complex_scalars_travel_as_their_parts():
    expr = _tensor(np.complex64) * (1.5 - 2j)
    program, _, scalars = lower(expr, expr.dtype)
    source = render_cuda(program, flat_geometry(program, 8, [0, 0]).layout)
    assert "const float s0_re" in source.kernel and "const float s0_im" in source.kernel
    args = scalar_arguments(scalar_converters(program), scalars)
    assert args == [np.float32(1.5), np.float32(-2.0)] and all(type(a) is np.float32 for a in args)


@pytest.mark.parametrize("kind", ["sum", "mean", "prod"])
def test_complex_reductions_compile(kind):
    sources = []
    for dtype in COMPLEX_DTYPES:
        t = _tensor(dtype, (64, 48))
        for axis in (None, 0, -1):
            sources += _render(getattr(lt, kind)(t * 1j, axis=axis))[1]
    _compile(sources, reductions=True)
