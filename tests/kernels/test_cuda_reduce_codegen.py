"""CUDA reduction code generation without a GPU: every reduction kind on every dtype, in every loop
shape (full, rows, columns, strided and broadcast operands, vector and scalar loads, tails), rendered
and compiled to PTX with NVRTC; and the loop-shape plans of the benchmark cases."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")

import lazytensor as lt
from lazytensor.kernels.cuda.accumulators import ACCUMULATORS
from lazytensor.kernels.cuda.layout import BLOCK
from lazytensor.kernels.cuda.prelude import prelude
from lazytensor.kernels.cuda.reduce_layout import MOMENT_LANES, plan_finish, plan_reduction
from lazytensor.kernels.cuda.nvrtc_check import compile_to_ptx
from lazytensor.kernels.ops import DTYPES
from lazytensor.kernels.program import Reduction, program_for
from lazytensor.kernels.cuda.render_cuda_reduce import render_cuda_finish, render_cuda_reduce, state_dtype
from lazytensor.kernels.backend import backend_for
from lazytensor.plan.planner import plan
from lazytensor.plan.steps import FusedReduction

SM_COUNT, BLOCKS_PER_SM = 132, 4
F16, F32, F64 = np.dtype("float16"), np.dtype("float32"), np.dtype("float64")
KINDS = ("sum", "mean", "prod", "max", "min", "any", "all", "var", "std", "argmax", "argmin")


def _compile_together(sources) -> str:
    """One NVRTC run per prelude for many kernels (-G: every line checked, 15x faster to compile)."""
    unique = {s.name: s for s in sources}
    ptx = []
    for float16 in (False, True):
        group = [s for s in unique.values() if s.float16 == float16]
        if group:
            unit = prelude(float16) + ACCUMULATORS + "\n" + "\n".join(s.kernel for s in group)
            ptx.append(compile_to_ptx(unit, name=f"reduce_batch_{len(group)}.cu", optimize=False))
    text = "\n".join(ptx)
    for s in unique.values():
        assert f".entry {s.name}(" in text, s.name
    return text


def _operands(arrays) -> list:
    return [(a.shape, a.strides, a.__array_interface__["data"][0]) for a in arrays]


def _render(expr):
    """The main and (if chunked) finish kernels the CUDA backend would run for reduction `expr`, as
    the planner cuts it (a ravel of a strided view, say, is materialized first)."""
    steps = plan(expr, np.empty(expr.shape, expr.dtype), backend_for("cpu"))
    (step,) = [s for s in steps if isinstance(s, FusedReduction)]
    program, spec, inputs = step.program, step.spec, step.inputs
    geometry = plan_reduction(spec.in_shape, spec.axes, _operands(inputs),
                              [np.dtype(d).itemsize for d in program.input_dtypes()], SM_COUNT, BLOCKS_PER_SM)
    sources = [render_cuda_reduce(program, spec, geometry.layout)]
    for chunks in (64, 1024):       # the finish kernels of a chunked run: a warp, a block per output
        sources.append(render_cuda_finish(spec, plan_finish(geometry.K, chunks)[0]))
    return geometry, sources


def _values(dtype, shape):
    rng = np.random.default_rng(0)
    return lt.asarray(rng.integers(1, 5, size=shape).astype(dtype), device="cpu")


# Reductions of a (64, 48) operand `t` covering every loop shape and operand layout.
LOOP_SHAPES = {
    "full-flat-vector": lambda t, kind: getattr(t, kind)(),
    "rows": lambda t, kind: getattr(t, kind)(axis=-1),
    "columns-vector": lambda t, kind: getattr(t, kind)(axis=0),
    "rows-of-transposed-view": lambda t, kind: getattr(t.T, kind)(axis=-1),
    "columns-strided-operands": lambda t, kind: getattr(t[:, ::2] + t[:, 1::2], kind)(axis=0),
    "full-not-contiguous": lambda t, kind: getattr(t[::2, :45], kind)(),
    "columns-odd-scalar": lambda t, kind: getattr(t[:5, :7], kind)(axis=0),
    "rows-broadcast-operand": lambda t, kind: getattr(t[:, :1] * t, kind)(axis=-1),
}


@pytest.mark.parametrize("loop_shape", list(LOOP_SHAPES))
def test_every_kind_and_dtype_compiles(loop_shape):
    make = LOOP_SHAPES[loop_shape]
    sources, layouts = [], set()
    for dtype in DTYPES:
        t = _values(dtype, (64, 48))
        for kind in KINDS:
            geometry, rendered = _render(make(t, kind))
            layouts.add((geometry.layout.shape, geometry.layout.vector > 1))
            sources += rendered
    expected = {"full-flat-vector": ("rows", True), "rows": ("rows", True), "columns-vector": ("columns", True),
                "columns-odd-scalar": ("columns", False), "rows-broadcast-operand": ("rows", True)}.get(loop_shape)
    if expected:
        assert expected in layouts, layouts
    _compile_together(sources)


def test_dtype_argument_ddof_and_tails_compile():
    sources = []
    for dtype in (np.int8, np.uint16, np.int64, np.float16, bool):
        t = _values(dtype, (3, 5, 7))
        for kind, kw in (("sum", {"dtype": np.float32}), ("sum", {"dtype": np.uint64}), ("prod", {"dtype": np.int64}),
                         ("mean", {"dtype": np.float16}), ("var", {"ddof": 1}), ("std", {"dtype": np.float32})):
            for axis in (None, 1, (0, 2), -1):
                sources += _render(getattr(t, kind)(axis=axis, **kw))[1]
    # A flat length no multiple of the vector: the scalar tail.
    geometry, rendered = _render(_values(np.float32, (1001,)).sum())
    assert geometry.layout.tail and geometry.layout.vector == 4
    sources += rendered
    _compile_together(sources)


def _meanvar_sources(dtype, shape):
    x = np.ones(shape, dtype)
    program = program_for((("load", dtype, 0),), 1, (), dtype)
    spec = Reduction("meanvar", tuple(range(len(shape) - 1)), shape, F64, F32)
    geometry = plan_reduction(shape, spec.axes, _operands([x]), [dtype.itemsize], SM_COUNT, BLOCKS_PER_SM,
                              MOMENT_LANES)
    return geometry, [render_cuda_reduce(program, spec, geometry.layout),
                      render_cuda_finish(spec, plan_finish(geometry.K, geometry.chunks)[0])]


@pytest.mark.parametrize("dtype", [F32, F16])
def test_batch_norm_statistics_are_columns_over_collapsed_nhw(dtype):
    geometry, sources = _meanvar_sources(dtype, (32, 56, 56, 64))
    lay = geometry.layout
    assert lay.shape == "columns" and (lay.kept_ndim, lay.reduced_ndim) == (1, 1)
    assert geometry.kept_extents == (64,) and geometry.reduced_extents == (32 * 56 * 56,)
    # Four channels per thread (four doubles of state each), 64 bytes of loads in flight.
    assert lay.vector == MOMENT_LANES == 4 and lay.vector * dtype.itemsize * lay.unroll == 64
    assert geometry.chunks > 1
    text = _compile_together(sources)
    assert "atom" not in text               # no atomics: a fixed reduction order
    assert "lt_deviation_push" in sources[0].kernel and "push_counted" not in sources[0].kernel


def test_finish_kernel_takes_a_block_per_output_with_many_chunks():
    assert plan_finish(64, 8)[0].group == 1
    assert plan_finish(64, 64)[0].group == 32
    layout, grid = plan_finish(64, 528)
    assert layout.group == BLOCK and grid == (64,)


def test_benchmark_cases_plan_multi_block_reductions():
    wave = SM_COUNT * BLOCKS_PER_SM
    n = 1 << 28
    a = ((n,), (4,), 0)
    full = plan_reduction((n,), (0,), [a, a], [4, 4], SM_COUNT, BLOCKS_PER_SM)
    assert full.layout.shape == "rows" and full.layout.group == BLOCK and full.layout.vector == 4
    assert full.chunks == wave and full.grid == (wave,) and not full.layout.index64
    assert full.layout.unroll * 2 * 16 >= 64          # 64 bytes of loads in flight per thread
    per_channel = plan_reduction((1 << 22, 64), (0,), [((1 << 22, 64), (256, 4), 0)], [4], SM_COUNT, BLOCKS_PER_SM)
    lay = per_channel.layout
    assert lay.shape == "columns" and lay.vector == 4 and lay.group * lay.vector == 64
    assert per_channel.grid == (1, wave)
    rows = plan_reduction((4096, 1000), (1,), [((4096, 1000), (4000, 4), 0)], [4], SM_COUNT, BLOCKS_PER_SM)
    assert rows.layout.shape == "rows" and rows.layout.group == 32 and rows.chunks == 1
    few_long_rows = plan_reduction((4, 1 << 24), (1,), [((4, 1 << 24), (1 << 26, 4), 0)], [4], SM_COUNT, BLOCKS_PER_SM)
    assert few_long_rows.layout.group == BLOCK and few_long_rows.chunks > 1


def test_plans_do_not_depend_on_anything_but_sizes_and_device():
    """The reduction order is a function of the plan: equal inputs, equal plans, equal bits."""
    args = ((1 << 20, 64), (0,), [((1 << 20, 64), (256, 4), 0)], [4], SM_COUNT, BLOCKS_PER_SM)
    assert plan_reduction(*args) == plan_reduction(*args)


def test_misaligned_or_strided_operands_say_why_loads_are_scalar():
    unaligned = plan_reduction((1000, 64), (0,), [((1000, 64), (256, 4), 4)], [4], SM_COUNT, BLOCKS_PER_SM)
    assert unaligned.layout.vector == 1 and unaligned.notes == ("in0 is not 16-byte aligned",)
    transposed = plan_reduction((64, 1000), (0,), [((64, 1000), (4, 256), 0)], [4], SM_COUNT, BLOCKS_PER_SM)
    assert transposed.layout.vector == 1 and "strided along the innermost" in transposed.notes[0]


def test_state_dtypes_follow_c_layout():
    assert state_dtype(Reduction("var", (0,), (4,), F64, F32)).itemsize == 24
    assert state_dtype(Reduction("argmax", (0,), (4,), F32, np.dtype(np.int64))).itemsize == 16
    assert state_dtype(Reduction("sum", (0,), (4,), np.dtype(np.int64), np.dtype(np.int64))).itemsize == 8
    assert state_dtype(Reduction("any", (0,), (4,), np.dtype(bool), np.dtype(bool))).itemsize == 1


def test_empty_and_unit_reductions_plan():
    empty = plan_reduction((0, 8), (0,), [((0, 8), (32, 4), 0)], [4], SM_COUNT, BLOCKS_PER_SM)
    assert empty.R == 0 and empty.chunks == 1 and empty.K == 8
    unit = plan_reduction((5, 1), (1,), [((5, 1), (4, 4), 0)], [4], SM_COUNT, BLOCKS_PER_SM)
    assert unit.R == 1 and unit.reduced_extents == (1,)
