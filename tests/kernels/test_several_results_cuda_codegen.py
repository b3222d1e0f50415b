"""CUDA kernels with several outputs, without a GPU: the layouts plan_launch gives them, and their
source compiled to PTX with NVRTC (vector and scalar steps, the tail, strided outputs, float16)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")

import lazytensor as lt
from lazytensor.testing import dags
from lazytensor.kernels.cuda.layout import CONTIGUOUS, flat_geometry, plan_launch
from lazytensor.kernels.cuda.nvrtc_check import NvrtcError, compile_to_ptx
from lazytensor.kernels.cuda.render_cuda import render_cuda
from lazytensor.plan.lower import lower_many

F16, F32 = np.dtype("float16"), np.dtype("float32")


def _cpu(values):
    return lt.asarray(np.asarray(values), device="cpu")


def _gradients_program(dtype=F32, shape=(64, 32)):
    """The four gradients of sum(tanh(a * b + c) * d) as one program, and its inputs."""
    a, b, c, d = (_cpu(np.ones(shape, dtype)) for _ in range(4))
    t = lt.tanh(a * b + c)
    dz = d * (1 - t * t)
    roots = [dz * b, dz * a, dz, t]
    return lower_many(roots, [r.dtype for r in roots])


def _compile(program, geometry):
    source = render_cuda(program, geometry.layout)
    try:
        ptx = compile_to_ptx(source.source, name=f"{source.name}.cu", optimize=False)
    except NvrtcError as exc:
        raise AssertionError(str(exc)) from None
    assert f".entry {source.name}(" in ptx
    return source


@pytest.mark.parametrize("n", [4096, 4099])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_flat_vector_kernel_with_four_outputs(dtype, n):
    program, inputs, _ = _gradients_program(dtype, (n,))
    assert len(program.outputs) == 4
    geometry = flat_geometry(program, n, [0] * (1 + len(inputs) + 3))
    assert geometry.layout.vector > 1 and len(geometry.layout.access) == 1 + len(inputs) + 3
    source = _compile(program, geometry)
    for k in (1, 2, 3):
        assert f"out{k}_v[lane] = " in source.kernel and "lt_copy_vector<" in source.kernel
    assert source.kernel.count("lt_copy_vector<") == len(inputs) + 4


def test_strided_and_broadcast_operands_and_mixed_dtypes():
    """A (rows, channels) iteration space with a per-channel input, outputs of three dtypes, one of
    them strided: scalar steps, no row loop (it serves one output)."""
    x = _cpu(np.ones((16, 8), F32))
    ch = _cpu(np.ones((8,), F32))
    roots = [x * ch, (x * ch) > 0, lt.floor(x - ch)]
    dtypes = [np.dtype(F16), np.dtype(bool), np.dtype(np.float64)]
    program, inputs, _ = lower_many(roots, dtypes)
    strided = (256, 16)          # float64, every other column of a (16, 16) buffer
    outs = [((16, 8), (16, 2)), ((16, 8), (8, 1)), ((16, 8), strided)]
    geometry = plan_launch(program, (16, 8), (16, 2), 0,
                           [(a.shape, a.strides, 0) for a in inputs] + [(s, st, 0) for s, st in outs[1:]])
    assert geometry.layout.rows == 0 and geometry.layout.vector == 1
    assert "out2 is strided in its innermost dimension" in geometry.notes
    _compile(program, geometry)


def test_vector_layout_of_a_broadcast_input_keeps_outputs_contiguous():
    x = _cpu(np.ones((64, 32), F32))
    ch = _cpu(np.ones((32,), F32))
    roots = [x - ch, (x - ch) * 2]
    program, inputs, _ = lower_many(roots, [F32, F32])
    geometry = plan_launch(program, (64, 32), (128, 4), 0,
                           [(a.shape, a.strides, 0) for a in inputs] + [((64, 32), (128, 4), 0)])
    assert geometry.layout.vector > 1 and geometry.layout.rows == 0
    assert geometry.layout.access[-1] == CONTIGUOUS
    _compile(program, geometry)


def test_single_output_kernels_are_unchanged():
    """lower_many of one root is the program lower() gives: the one-output path keeps its kernels."""
    from lazytensor.plan.lower import lower
    a, b = _cpu(np.ones(8, F32)), _cpu(np.ones(8, F32))
    e = lt.relu(a * b + 1)
    assert lower_many([e], [F32])[0] is lower(e, F32)[0]


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(dags(max_leaves=3, max_ops=6), st.data())
def test_random_dag_families_compile_to_ptx(dag, data):
    picks = data.draw(st.lists(st.sampled_from(dag.nodes), min_size=2, max_size=4))
    shape = np.broadcast_shapes(*[n.expected.shape for n in picks])
    program, inputs, _ = lower_many([n.expr for n in picks], [n.dtype for n in picks])
    outs = [np.empty(shape, n.dtype) for n in picks]
    geometry = plan_launch(program, shape, outs[0].strides, outs[0].ctypes.data,
                           [(a.shape, a.strides, a.ctypes.data) for a in inputs]
                           + [(o.shape, o.strides, o.ctypes.data) for o in outs[1:]])
    _compile(program, geometry)
